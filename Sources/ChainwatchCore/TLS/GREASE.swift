/// Whether a 16-bit value is one of the GREASE values of RFC 8701 (`0x0A0A`, `0x1A1A`, ... `0xFAFA`),
/// which clients sprinkle into lists so that servers learn to ignore unknown values.
func isGREASE(_ value: UInt16) -> Bool {
    value & 0x0F0F == 0x0A0A && value >> 8 == value & 0xFF
}
