import ChainwatchCore
import Logging

/// The operator's log on standard error, with everything a peer can put into it escaped (`LogText`): certificate
/// names, SNI and request lines reach messages and metadata, and a newline or a terminal control sequence in them
/// must neither forge a log record nor reach the terminal raw.
struct EscapingLogHandler: LogHandler {
    private var inner: StreamLogHandler

    init(_ inner: StreamLogHandler) { self.inner = inner }

    var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }
    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }
    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue.mapValues(Self.escaped) }
    }
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue.map(Self.escaped) }
    }

    func log(event: LogEvent) {
        var event = event
        let text = event.message.description
        let escaped = LogText.escaped(text)
        if escaped != text { event.message = Logger.Message(stringLiteral: escaped) }
        event.metadata = event.metadata?.mapValues(Self.escaped)
        inner.log(event: event)
    }

    static func escaped(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(LogText.escaped(text))
        case .stringConvertible(let convertible): .string(LogText.escaped(convertible.description))
        case .array(let values): .array(values.map(escaped))
        case .dictionary(let values): .dictionary(values.mapValues(escaped))
        }
    }
}
