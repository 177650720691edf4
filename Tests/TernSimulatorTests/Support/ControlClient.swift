import TernTestSupport

/// The simulator's control API is one of Tern's JSON APIs.
typealias ControlClient = HTTPTestClient
typealias ControlResponse = HTTPTestResponse
