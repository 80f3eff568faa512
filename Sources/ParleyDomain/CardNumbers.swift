/// Payment card numbers in free text, the way people type them: 13-19 digits that pass the Luhn
/// check, written together or in groups separated by spaces (single, double, no-break), dashes,
/// dots, slashes or a line break, and often followed by the expiry date and the security code
/// ("4242 4242 4242 4242 12/27 cvc 123"). Masking keeps the card's last four digits and every
/// separator, and masks the expiry and security code that follow it.
///
/// A card number followed by its expiry or code often runs into one longer digit run
/// ("4242424242424242 123" is 19 digits that fail Luhn), so the card is searched for inside each run:
/// it starts at the run's start (or at the start of one of its groups) and ends where a group ends.
public enum CardNumbers {
    public static let maskCharacter: Character = "•"
    static let maskScalar: Unicode.Scalar = "•"

    /// Card lengths in the order they are tried when a run holds several candidates: the common
    /// lengths first (16: Visa, Mastercard, Discover; 15: Amex; 14: Diners), then the rest.
    static let preferredLengths = [16, 15, 14, 19, 13, 18, 17]
    /// Most separator characters between two digit groups ("4242  4242" has two).
    static let maxSeparatorRun = 3
    /// How far after a card number its expiry and security code are looked for.
    static let trailingWindow = 48

    /// `text` with every card number (and the expiry and code after it) masked, and how many cards were found.
    public static func mask(_ text: String) -> (text: String, count: Int) {
        var scalars = Array(text.unicodeScalars)
        var count = 0
        var index = 0
        while index < scalars.count {
            guard scalars[index].isDigit, index == 0 || !scalars[index - 1].isDigit else {
                index += 1
                continue
            }
            let run = digitRun(in: scalars, from: index)
            if let card = findCard(in: run, scalars: scalars) {
                for position in card.dropLast(4) { scalars[position] = maskScalar }
                count += 1
                let end = maskTrailingDetails(in: &scalars, after: card.last!)
                index = end
            } else {
                index = (run.groups.last?.last ?? index) + 1
            }
        }
        guard count > 0 else { return (text, 0) }
        var masked = String.UnicodeScalarView()
        masked.append(contentsOf: scalars)
        return (String(masked), count)
    }

    /// Digit positions from `start`, grouped where separators split them.
    struct Run {
        var groups: [[Int]]
    }

    static func digitRun(in scalars: [Unicode.Scalar], from start: Int) -> Run {
        var groups: [[Int]] = []
        var current: [Int] = []
        var cursor = start
        var total = 0
        while cursor < scalars.count {
            if scalars[cursor].isDigit {
                current.append(cursor)
                total += 1
                cursor += 1
                continue
            }
            // A short stretch of separators followed by a digit continues the run.
            var look = cursor
            while look < scalars.count, look - cursor < maxSeparatorRun, scalars[look].isCardSeparator { look += 1 }
            guard look > cursor, look < scalars.count, scalars[look].isDigit, !current.isEmpty else { break }
            groups.append(current)
            current = []
            cursor = look
            if total > 40 { break }  // far longer than any card and its details
        }
        if !current.isEmpty { groups.append(current) }
        return Run(groups: groups)
    }

    /// The digit positions of a Luhn-valid card in the run: starting at a group's start, ending at a group's end.
    static func findCard(in run: Run, scalars: [Unicode.Scalar]) -> [Int]? {
        for startGroup in run.groups.indices {
            let digits = run.groups[startGroup...].flatMap { $0 }
            // Lengths at which a group ends.
            var boundaries: Set<Int> = []
            var length = 0
            for group in run.groups[startGroup...] {
                length += group.count
                boundaries.insert(length)
            }
            for candidate in preferredLengths where boundaries.contains(candidate) {
                let positions = Array(digits.prefix(candidate))
                if isLuhnValid(positions.map { Int(scalars[$0].value) - 48 }) { return positions }
            }
        }
        return nil
    }

    /// Masks an expiry date and a security code that follow a card number ending at `last`, with only
    /// separators, punctuation and words such as "exp" or "cvc" between them. Returns where scanning stopped.
    static func maskTrailingDetails(in scalars: inout [Unicode.Scalar], after last: Int) -> Int {
        var cursor = last + 1
        let limit = min(scalars.count, last + 1 + trailingWindow)
        var found = 0
        while cursor < limit, found < 2 {
            let scalar = scalars[cursor]
            if scalar.isCardSeparator || ",;:()#=".unicodeScalars.contains(scalar) {
                cursor += 1
                continue
            }
            if scalar.isLetter {
                var end = cursor
                while end < scalars.count, scalars[end].isLetter || scalars[end].isDigit && end > cursor { end += 1 }
                var word = String.UnicodeScalarView()
                word.append(contentsOf: scalars[cursor..<end])
                guard trailingWords.contains(String(word).lowercased()) else { return cursor }
                cursor = end
                if cursor < scalars.count, scalars[cursor] == "." { cursor += 1 }
                continue
            }
            guard scalar.isDigit else { return cursor }
            // A long number is not a detail of this card (it may be the next card): leave it.
            if digitRun(in: scalars, from: cursor).groups.joined().count >= 12 { return cursor }
            // A date (MM/YY, MM/YYYY, MM YY, MM-YY, MM.YY) or a 3-4 digit code.
            var first = cursor
            while first < scalars.count, scalars[first].isDigit { first += 1 }
            let firstCount = first - cursor
            var digits = Array(cursor..<first)
            var end = first
            if (1...2).contains(firstCount), first + 1 < scalars.count, "/-. \u{00A0}".unicodeScalars.contains(scalars[first]),
                scalars[first + 1].isDigit
            {
                var second = first + 1
                while second < scalars.count, scalars[second].isDigit { second += 1 }
                if [2, 4].contains(second - first - 1) {
                    digits += Array(first + 1..<second)
                    end = second
                } else {
                    return cursor
                }
            } else if !(3...4).contains(firstCount) {
                return cursor
            }
            for position in digits { scalars[position] = maskScalar }
            found += 1
            cursor = end
        }
        return cursor
    }

    /// Words people put between a card number and its expiry or code.
    static let trailingWords: Set<String> = [
        "exp", "expiry", "expires", "expiration", "expiring", "valid", "thru", "through", "until", "till", "to", "date", "end",
        "cvc", "cvv", "cvv2", "cvc2", "csc", "cid", "cvn", "security", "sec", "code", "pin", "and", "with", "the", "is", "mm", "yy",
    ]

    public static func isLuhnValid(_ digits: [Int]) -> Bool {
        var sum = 0
        for (offset, digit) in digits.reversed().enumerated() {
            if offset % 2 == 1 {
                let doubled = digit * 2
                sum += doubled > 9 ? doubled - 9 : doubled
            } else {
                sum += digit
            }
        }
        return !digits.isEmpty && sum % 10 == 0
    }
}

extension Unicode.Scalar {
    fileprivate var isDigit: Bool { value >= 48 && value <= 57 }
    fileprivate var isLetter: Bool { properties.isAlphabetic }
    /// What people put between digit groups: spaces (also no-break and thin), tabs, line breaks,
    /// dashes, dots and slashes.
    fileprivate var isCardSeparator: Bool {
        switch value {
        case 0x20, 0x09, 0x0A, 0x0D, 0xA0, 0x2007, 0x2009, 0x202F, 0x2D, 0x2E, 0x2F, 0x2010, 0x2011, 0x2012, 0x2013: true
        default: false
        }
    }
}
