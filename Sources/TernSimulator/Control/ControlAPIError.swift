import TernWeb

/// The control API's errors: Tern's one JSON error shape.
typealias ControlAPIError = JSONAPIError

extension ScenarioError: FieldError {}
