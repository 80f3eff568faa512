import ParleyDomain
import Testing

@Suite("Card number masking")
struct CardNumbersTests {
    @Test("Luhn-valid 13-19 digit numbers are masked, with spaces or dashes kept", arguments: [
        ("my card is 4242424242424242 thanks", "my card is ••••••••••••4242 thanks"),
        ("4242 4242 4242 4242", "•••• •••• •••• 4242"),
        ("4000-0566-5566-5556 exp 12/29", "••••-••••-••••-5556 exp 12/29"),
        ("amex 378282246310005.", "amex •••••••••••0005."),
        ("visa 4222222222222", "visa •••••••••2222"),
        ("long 6011111111111111110", "long •••••••••••••••1110"),
        ("two: 4242424242424242 and 5555 5555 5555 4444", "two: ••••••••••••4242 and •••• •••• •••• 4444"),
    ])
    func masked(text: String, expected: String) {
        #expect(CardNumbers.mask(text).text == expected)
        #expect(CardNumbers.mask(text).count >= 1)
    }

    @Test("other numbers stay as they are", arguments: [
        "order 4242424242424241 (fails Luhn)",
        "call +44 20 7946 0958",
        "tracking 123456789012",
        "20 digits 42424242424242424242",
        "4242  4242  4242  4242 has double spaces",
        "dates 2026-11-22 and 2027-01-05",
        "",
    ])
    func untouched(text: String) {
        #expect(CardNumbers.mask(text) == (text, 0))
    }
}
