import ArgumentParser
import Logging

extension Logger.Level: @retroactive ExpressibleByArgument {}

/// Sends log lines to standard error at `level`. Called once, from the command being run.
func bootstrapLogging(_ level: Logger.Level) {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
}
