/// Payment card numbers in free text: 13-19 digits, optionally grouped with single spaces or dashes,
/// that pass the Luhn check. Masking keeps the last four digits and the grouping.
public enum CardNumbers {
    public static let maskCharacter: Character = "•"

    /// `text` with every card number masked, and how many were found.
    public static func mask(_ text: String) -> (text: String, count: Int) {
        var characters = Array(text)
        var count = 0
        var index = 0
        while index < characters.count {
            guard characters[index].isASCIIDigit, index == 0 || !characters[index - 1].isASCIIDigit else {
                index += 1
                continue
            }
            // The longest run of digits with single separators between them.
            var digitPositions: [Int] = []
            var cursor = index
            while cursor < characters.count {
                if characters[cursor].isASCIIDigit {
                    digitPositions.append(cursor)
                    cursor += 1
                } else if (characters[cursor] == " " || characters[cursor] == "-"), cursor + 1 < characters.count,
                    characters[cursor + 1].isASCIIDigit, cursor > index, characters[cursor - 1].isASCIIDigit
                {
                    cursor += 1
                } else {
                    break
                }
                if digitPositions.count > 19 { break }
            }
            if let match = bestCard(in: digitPositions, of: characters) {
                for position in match.dropLast(4) { characters[position] = maskCharacter }
                count += 1
                index = (match.last ?? index) + 1
            } else {
                index = cursor
            }
        }
        return (String(characters), count)
    }

    /// The card number in a run of digits: the whole run when it is 13-19 Luhn-valid digits.
    private static func bestCard(in positions: [Int], of characters: [Character]) -> [Int]? {
        guard (13...19).contains(positions.count) else { return nil }
        let digits = positions.map { Int(characters[$0].asciiValue! - 48) }
        return isLuhnValid(digits) ? positions : nil
    }

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

extension Character {
    fileprivate var isASCIIDigit: Bool { asciiValue.map { $0 >= 48 && $0 <= 57 } ?? false }
}
