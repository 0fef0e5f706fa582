// Fuzzes HostsFile: the hosts(5) file given to `--hosts`.
//
// Input: the file's text (bytes that are not UTF-8 become U+FFFD, as the proxy reads it).
// Invariants: every name the file lists is found by `lookup` under that name, and with a trailing dot; every
// address it gives is an IP address.
import ChainwatchCore
import FuzzSupport

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHostsFile(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: FuzzInput(start, count).rest, as: UTF8.self)
    let hosts = HostsFile(text: text)
    for (name, addresses) in hosts.addresses {
        check(!addresses.isEmpty, "\(name) listed with no address")
        check(hosts.lookup(name) == addresses, "lookup(\(name.debugDescription)) = \(hosts.lookup(name)), file says \(addresses)")
        check(hosts.lookup(name + ".") == addresses, "lookup(\((name + ".").debugDescription)) = \(hosts.lookup(name + ".")), file says \(addresses)")
        for address in addresses {
            check(IPAddressText.parse(address) != nil, "\(address) is not an IP address")
        }
    }
    return 0
}
