import ParleyDomain
import Testing

@Suite("Card numbers in transcripts")
struct SpokenDigitsTests {
    @Test("spoken, written or mixed: 13 or more digits in a row are masked, the last four kept", arguments: [
        ("my card is four two four two four two four two four two four two four two four two thanks",
         "my card is •••••••••••• 4242 thanks"),
        // One digit misheard (fails Luhn): still masked, unlike typed text.
        ("four two four two four two four two four two four two four two four one", "•••••••••••• 4241"),
        ("it's 4242 4242 4242 4242 expiring twelve twenty seven", "it's •••• •••• •••• 4242 expiring twelve twenty seven"),
        ("5555 5555 5555 4441 is the card", "•••••••••••• 4441 is the card"),
        ("double four two two four two four two four two four two four two four two", "•••••••••••• 4242"),
        ("five five five five, five five five five, five five five five, four four four four.", "•••••••••••• 4444."),
        ("oh one two three four five six seven eight nine zero one two three", "•••••••••• 0123"),
    ])
    func masked(spoken: String, expected: String) {
        let result = SpokenDigits.mask(spoken)
        #expect(result.text == expected)
        #expect(result.count == 1)
    }

    @Test("short numbers, times and amounts are left alone")
    func leftAlone() {
        for text in [
            "my order number is four two seven one", "call me at nine", "it cost twenty nine ninety nine",
            "one two three four five six seven eight nine one two three", "the code is 4411 and the flat is 12", "",
            "o my god", "I have two parcels and one letter",
        ] {
            #expect(SpokenDigits.mask(text) == (text, 0), "\(text)")
        }
    }
}
