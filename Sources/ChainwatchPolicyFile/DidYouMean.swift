/// Suggests the closest known word for a misspelt key or value (Levenshtein distance).
enum DidYouMean {
    static func suggestion(for word: String, among candidates: [String]) -> String? {
        let w = Array(word.lowercased().unicodeScalars)
        var best: (String, Int)? = nil
        for c in candidates {
            let d = distance(w, Array(c.unicodeScalars))
            if best == nil || d < best!.1 { best = (c, d) }
        }
        guard let best else { return nil }
        let limit = max(1, min(3, w.count / 3 + 1))
        return best.1 <= limit ? best.0 : nil
    }

    static func distance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }

    /// `did you mean 'x'?` or a list of the valid words.
    static func hint(for word: String, among candidates: [String]) -> String {
        if let s = suggestion(for: word, among: candidates) { return "did you mean '\(s)'?" }
        return "expected one of: " + candidates.joined(separator: ", ")
    }
}
