import ChainwatchCore
import ChainwatchEventLoop
struct ProbeKey: Hashable { var address: SocketAddress; var serverName: String?; var alpn: [String]; var maxVersion: TLSVersion? }
struct ProbeChain { var chainDER: [[UInt8]] }
enum ProbeResult { case success(ProbeChain), failure(String) }
public final class Prober: Sendable {
    public init(timeoutMilliseconds: Int) {}
    func probe(_ key: ProbeKey, on loop: EventLoop, completion: @escaping (ProbeResult) -> Void) {}
}
