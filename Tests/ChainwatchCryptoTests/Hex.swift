/// Bytes from hex digits, whitespace ignored (test fixtures are written as the RFCs print them).
func hex(_ digits: String) -> [UInt8] {
    let clean = Array(digits.unicodeScalars.filter { !$0.properties.isWhitespace })
    precondition(clean.count % 2 == 0, "odd number of hex digits")
    return stride(from: 0, to: clean.count, by: 2).map { UInt8(String(clean[$0..<$0 + 2].map(Character.init)), radix: 16)! }
}
