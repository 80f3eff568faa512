/// Card numbers said out loud, as a transcriber writes them: "four two four two ..." or "4242 4242 ...",
/// or a mix ("double four", "oh" for zero). A transcript's runs of 13 or more digits (the shortest
/// card) are masked, keeping the last four; unlike typed text the Luhn check is not asked for, since
/// one misheard digit fails it and would leave the rest of the card readable. The typed rules
/// (`CardNumbers.mask`) run first, so a card written in digits keeps its separators and its expiry
/// and code are masked too.
public enum SpokenDigits {
    static let words: [Substring: Int] = [
        "zero": 0, "oh": 0, "o": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
        "eight": 8, "nine": 9,
    ]
    static let repeats: [Substring: Int] = ["double": 2, "triple": 3]
    /// The fewest digits a card has.
    public static let cardDigits = 13

    /// `text` with every run of 13 or more spoken or written digits masked, and how many runs there were.
    public static func mask(_ original: String) -> (text: String, count: Int) {
        let typed = CardNumbers.mask(original)
        let text = typed.text
        // Tokens with their ranges; a run is a sequence of tokens that are all digits.
        let tokens = tokenize(text)
        var output = ""
        var cursor = text.startIndex
        var count = 0
        var index = 0
        while index < tokens.count {
            var digits: [Int] = []
            var end = index
            var pendingRepeat = 1
            while end < tokens.count {
                let word = tokens[end].word
                if let times = repeats[word], end + 1 < tokens.count, let next = value(of: tokens[end + 1].word), next.count == 1 {
                    pendingRepeat = times
                    end += 1
                    continue
                }
                guard let value = value(of: word) else { break }
                for _ in 0..<pendingRepeat { digits += value }
                pendingRepeat = 1
                end += 1
            }
            if end > index, digits.count >= cardDigits {
                let range = tokens[index].range.lowerBound..<tokens[end - 1].range.upperBound
                output += text[cursor..<range.lowerBound]
                output += String(repeating: CardNumbers.maskCharacter, count: digits.count - 4)
                output += " " + digits.suffix(4).map(String.init).joined()
                cursor = range.upperBound
                count += 1
            }
            index = max(end, index + 1)
        }
        output += text[cursor...]
        return (output, count + typed.count)
    }

    private static func value(of word: Substring) -> [Int]? {
        if let digit = words[word] { return [digit] }
        guard !word.isEmpty, word.allSatisfy(\.isASCIIDigitOrSeparator), word.contains(where: \.isNumber) else { return nil }
        return word.compactMap { $0.wholeNumberValue }
    }

    private static func tokenize(_ text: String) -> [(word: Substring, range: Range<String.Index>)] {
        var tokens: [(Substring, Range<String.Index>)] = []
        var start: String.Index?
        var index = text.startIndex
        func close(at end: String.Index) {
            guard let begin = start else { return }
            // Trailing punctuation ("nine," "4242.") belongs to the sentence, not the number.
            var last = end
            while last > begin, let previous = Optional(text.index(before: last)), ",.;:!?".contains(text[previous]) { last = previous }
            if last > begin { tokens.append((text[begin..<last].lowercased()[...], begin..<last)) }
            start = nil
        }
        while index < text.endIndex {
            if text[index].isWhitespace {
                close(at: index)
            } else if start == nil {
                start = index
            }
            index = text.index(after: index)
        }
        close(at: text.endIndex)
        return tokens
    }
}

extension Character {
    fileprivate var isASCIIDigitOrSeparator: Bool { ("0"..."9").contains(self) || self == "-" || self == "." || self == "/" }
}
