extension UInt16 {
    /// `0x` and four uppercase hex digits (`0x7F1C`), for code points without a name.
    var hexDescription: String {
        let digits = String(self, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: 4 - digits.count) + digits
    }
}
