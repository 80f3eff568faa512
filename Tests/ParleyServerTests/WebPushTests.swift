import Crypto
import Foundation
@testable import ParleyServer
import ParleyAPI
import Testing

/// Web Push's payload encryption against RFC 8291's own example (Appendix A): the same keys and salt
/// must give the same bytes. (`e2e/test_webpush.py` also decrypts a live push with `http_ece`.)
@Suite("Web Push encryption (RFC 8291)")
struct WebPushTests {
    @Test("RFC 8291 Appendix A, byte for byte")
    func rfcVector() throws {
        let ephemeral = try P256.KeyAgreement.PrivateKey(rawRepresentation: try #require(Data(base64URL: "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw")))
        #expect(ephemeral.publicKey.x963Representation.base64URLEncoded
            == "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8")
        let body = try WebPushSender.encrypt(
            Data("When I grow up, I want to be a watermelon".utf8),
            for: WebPushKeys(
                p256dh: "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4", auth: "BTBZMqHH6r4Tts7J_aSIgg"),
            salt: try #require(Data(base64URL: "DGv6ra1nlYgDCS1FRnbzlw")), ephemeral: ephemeral)
        #expect(body.base64URLEncoded == "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN")
    }
}
