/// Text from peers (certificate names, SNI, request lines, error details) on its way to the operator's log: one log
/// record must stay one line, and the terminal must get no control sequences. Control characters (C0, DEL, C1) and
/// the Unicode line and paragraph separators become visible escapes (`\n`, `\r`, `\t`, `\u{1B}`); a backslash is
/// doubled, so an escape in the text cannot pass for one made here. Text without them comes back as it is.
public enum LogText {
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\\": out += "\\\\"
            case _ where needsEscape(scalar): out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: true
        default: false
        }
    }
}
