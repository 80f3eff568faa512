import ParleyDomain
import Testing

@Suite("Card number masking")
struct CardNumbersTests {
    /// How people really type card numbers: grouped or not, with the expiry and code after them.
    /// Each spelling's card digits, expiry and code are masked; the last four of the card stay.
    @Test("real-world spellings of card numbers are masked, with the expiry and code after them", arguments: [
        ("my card is 4242424242424242 thanks", "my card is ••••••••••••4242 thanks"),
        ("4242 4242 4242 4242", "•••• •••• •••• 4242"),
        ("4000-0566-5566-5556 exp 12/29", "••••-••••-••••-5556 exp ••/••"),
        ("amex 378282246310005.", "amex •••••••••••0005."),
        ("amex 3782 822463 10005", "amex •••• •••••• •0005"),
        ("visa 4222222222222", "visa •••••••••2222"),
        ("long 6011111111111111110", "long •••••••••••••••1110"),
        ("two: 4242424242424242 and 5555 5555 5555 4444", "two: ••••••••••••4242 and •••• •••• •••• 4444"),
        ("my card 4242 4242 4242 4242 12/27 cvc 123", "my card •••• •••• •••• 4242 ••/•• cvc •••"),
        ("4242424242424242 123", "••••••••••••4242 •••"),
        ("4242 4242 4242 4242 12 27", "•••• •••• •••• 4242 •• ••"),
        ("4242.4242.4242.4242", "••••.••••.••••.4242"),
        ("4242/4242/4242/4242", "••••/••••/••••/4242"),
        ("4242  4242  4242  4242", "••••  ••••  ••••  4242"),
        ("4242\u{00A0}4242\u{00A0}4242\u{00A0}4242", "••••\u{00A0}••••\u{00A0}••••\u{00A0}4242"),
        ("4242 4242\n4242 4242", "•••• ••••\n•••• 4242"),
        ("4242 4242\r\n4242 4242 exp 01/30", "•••• ••••\r\n•••• 4242 exp ••/••"),
        ("card: 5555-5555-5555-4444, exp 03/2028, cvv 987", "card: ••••-••••-••••-4444, exp ••/••••, cvv •••"),
        ("5555555555554444 0328 456", "••••••••••••4444 •••• •••"),
        ("mastercard 5105 1051 0510 5100 expires 11/26", "mastercard •••• •••• •••• 5100 expires ••/••"),
        ("discover 6011 0009 9013 9424 cvc: 321", "discover •••• •••• •••• 9424 cvc: •••"),
        ("diners 3056 930902 5904", "diners •••• •••••• 5904"),
        ("jcb 3566 0020 2036 0505 valid thru 09/29", "jcb •••• •••• •••• 0505 valid thru ••/••"),
        ("unionpay 6200000000000005", "unionpay ••••••••••••0005"),
        ("4242-4242-4242-4242 12-27 999", "••••-••••-••••-4242 ••-•• •••"),
        ("is it ok to send 4111 1111 1111 1111?", "is it ok to send •••• •••• •••• 1111?"),
        ("(4111111111111111)", "(••••••••••••1111)"),
        ("4111 1111 1111 1111 exp. 1/27 security code 1234", "•••• •••• •••• 1111 exp. •/•• security code ••••"),
        ("visa\t4111\t1111\t1111\t1111", "visa\t••••\t••••\t••••\t1111"),
        ("4012 8888 8888 1881 - 08.27 - 555", "•••• •••• •••• 1881 - ••.•• - •••"),
        ("4242 4242 4242 4242 and 5105105105105100", "•••• •••• •••• 4242 and ••••••••••••5100"),
        ("номер 4242 4242 4242 4242", "номер •••• •••• •••• 4242"),
        ("4242\u{202F}4242\u{202F}4242\u{202F}4242 12/27", "••••\u{202F}••••\u{202F}••••\u{202F}4242 ••/••"),
        ("4242–4242–4242–4242", "••••–••••–••••–4242"),
    ])
    func masked(text: String, expected: String) {
        let result = CardNumbers.mask(text)
        #expect(result.text == expected)
        #expect(result.count >= 1)
    }

    @Test("other numbers stay as they are: orders, phones, dates, amounts", arguments: [
        "order 4242424242424241 (fails Luhn)",
        "order number 100200300400500600",
        "call +44 20 7946 0958",
        "call me on 0049 170 1234567 tomorrow",
        "tracking 123456789012",
        "20 digits 42424242424242424242",
        "dates 2026-11-22 and 2027-01-05",
        "meeting 12/27/2026 at 10:30",
        "it cost 1,234.56 for 3 items",
        "IBAN DE89 3704 0044 0532 0130 00",
        "ISBN 978-3-16-148410-0",
        "",
    ])
    func untouched(text: String) {
        #expect(CardNumbers.mask(text) == (text, 0))
    }
}
