import Crypto
import Foundation
import ParleyServer
import Testing

/// AWS Signature Version 4 against the vectors AWS publishes (Fixtures/sigv4/vectors.json says
/// where each comes from): its test suite, and the S3 documentation's examples.
@Suite("SigV4")
struct SigV4Tests {
    struct Vectors: Decodable {
        struct Suite: Decodable {
            struct Credentials: Decodable { var accessKey, secretKey, region, service: String }
            struct Case: Decodable {
                var name, method, path, body, authorization: String
                var query: [[String]]
                var headers: [[String]]
                var canonicalRequest: String?
                var stringToSign: String?
            }
            var source: String
            var credentials: Credentials
            var cases: [Case]
        }
        var suites: [Suite]
    }

    static func vectors() throws -> Vectors {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/sigv4/vectors.json")
        return try JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }

    @Test("every published vector: the Authorization header, and the canonical request and string to sign where given")
    func published() throws {
        var checked = 0
        for suite in try Self.vectors().suites {
            let signer = SigV4(
                accessKey: suite.credentials.accessKey, secretKey: suite.credentials.secretKey, region: suite.credentials.region,
                service: suite.credentials.service)
            for vector in suite.cases {
                let request = SigV4.Request(
                    method: vector.method, path: vector.path, query: vector.query.map { ($0[0], $0[1]) },
                    headers: vector.headers.map { ($0[0], $0[1]) }, payloadHash: SigV4.hex(SHA256.hash(data: Data(vector.body.utf8))))
                #expect(signer.authorization(request) == vector.authorization, "\(vector.name)")
                if let expected = vector.canonicalRequest {
                    let canonical = SigV4.canonicalRequest(request).text
                    #expect(canonical == expected, "\(vector.name)")
                    if let sts = vector.stringToSign {
                        #expect(signer.stringToSign(canonicalRequest: canonical, amzDate: "20150830T123600Z") == sts, "\(vector.name)")
                    }
                }
                checked += 1
            }
        }
        #expect(checked == 10)
    }

    @Test("keys are percent-encoded as SigV4 wants: unreserved kept, slashes kept in paths, UTF-8 by bytes")
    func encoding() {
        #expect(SigV4.encode("voice/brd_1/a b+c$", slash: false) == "voice/brd_1/a%20b%2Bc%24")
        #expect(SigV4.encode("a/b") == "a%2Fb")
        #expect(SigV4.encode("\u{1234}") == "%E1%88%B4")
        #expect(SigV4.amzDate(Date(timeIntervalSince1970: 1_440_938_160)) == "20150830T123600Z")
    }
}
