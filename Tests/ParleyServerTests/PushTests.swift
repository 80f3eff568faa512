import Foundation
import HTTPTypes
import JWTKit
import ParleyAPI
import ParleyMedia
import ParleyKit
import ParleyKitNIO
import ParleyServer
import Testing

/// Push notifications through a local APNs endpoint (`FakeAPNs`: HTTP/2 over TLS, the provider
/// token checked with the key's public half).
@Suite("Push notifications: registration, APNs, who gets one, masking, invalid tokens")
struct PushTests {
    static let deviceToken = String(repeating: "ab12", count: 16)

    @Test("a consumer without a live connection gets a notification when an agent writes (masked, then with text), a connected one none; a dead token is deleted")
    func apns() async throws {
        let key = ES256PrivateKey()
        let fake = try await FakeAPNs.start(publicKey: key.publicKey)
        do {
            try await TestServer.run(configure: {
                $0.apnsAPIURL = fake.baseURL
                $0.providerCAFile = fake.certificateFile
            }) { server in
                let acme = try await BrandScenario.make(server)
                let credentials = ConnectAPNsRequest(teamId: "ABCDE12345", keyId: "KEY1234567", privateKey: key.pemRepresentation, topic: "com.acme.shop")
                let (agentToken, _) = try await acme.agent()
                #expect(try await server.request(.put, "/v1/apps/\(acme.app.id)/push/apns", token: agentToken, json: credentials).status == .forbidden)
                var bad = credentials
                bad.privateKey = "not a key"
                #expect(try await server.request(.put, "/v1/apps/\(acme.app.id)/push/apns", token: acme.adminToken, json: bad).error.field == "privateKey")
                let connected = try await server.request(.put, "/v1/apps/\(acme.app.id)/push/apns", token: acme.adminToken, json: credentials)
                #expect(connected.status == .ok && !connected.text.contains("PRIVATE KEY"))
                #expect(try await server.get("/v1/push-connections", token: acme.adminToken).decode(ListResponse<PushConnectionDTO>.self).items.map(\.topic) == ["com.acme.shop"])

                let (consumerToken, _) = try await acme.consumer(name: "Dana")
                let sent = try await acme.send("Where is my parcel?", as: consumerToken)
                // Registration: validated.
                #expect(try await server.post("/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: .apns, token: "xyz")).error.field == "token")
                // A Web Push endpoint that is not a known push service is never accepted (nor called).
                #expect(try await server.post("/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(
                    provider: .webpush, token: "https://10.0.0.7/internal", keys: WebPushKeys(p256dh: "BA", auth: "AA"))).error.field == "token")
                // The SDK registers the device's token (as UIApplication hands it over: bytes).
                let parley = try await Parley.configure(
                    brandID: acme.brand.id, appID: acme.app.id, server: URL(string: "http://127.0.0.1:\(server.port)/")!,
                    identity: .anonymous(), storage: ParleyStorage(
                        directory: FileManager.default.temporaryDirectory.appendingPathComponent("push-\(UUID().uuidString)"),
                        key: .bytes(Data(repeating: 9, count: 32))), transport: NIOTransport())
                try await parley.registerForNotifications(apnsToken: Data(repeating: 0xab, count: 32), sandbox: true)
                #expect(try await server.post("/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: .apns, token: Self.deviceToken)).status == .ok)

                // The consumer's app is in the background (no connection): the agent's answer is pushed, masked.
                _ = try await acme.reply("It ships tomorrow morning", in: sent.conversation.id, as: acme.adminToken)
                let first = try await Self.wait(fake, count: 1)
                #expect(first.token == Self.deviceToken)
                #expect(first.alertBody == "New message from \(acme.brand.name)")
                #expect(first.badge == 1)
                #expect(first.headers["apns-topic"] == "com.acme.shop" && first.headers["apns-collapse-id"] == sent.conversation.id.rawValue)
                #expect(first.jwtIssuer == "ABCDE12345" && first.jwtKeyId == "KEY1234567")
                // What the app's notification delegate reads, with ParleyKit's helper.
                let notification = try #require(ParleyNotification(userInfo: first.payload))
                #expect(notification.conversationId == sent.conversation.id && notification.kind == .text)

                // The brand shows text: the next one carries it, and the badge counts both unread.
                #expect(try await server.request(.patch, "/v1/brand/settings", token: acme.adminToken, json: UpdateBrandSettingsRequest(pushPreview: .text)).status == .ok)
                _ = try await acme.reply("Tracking: ZX-99", in: sent.conversation.id, as: acme.adminToken)
                let second = try await Self.wait(fake, count: 2)
                #expect(second.alertBody == "Tracking: ZX-99" && second.badge == 2)

                // Connected (the app is open): no notification.
                let probe = try await RealtimeProbe.connect(port: server.port, token: consumerToken)
                _ = try await acme.reply("Anything else?", in: sent.conversation.id, as: acme.adminToken)
                _ = try await probe.next(within: 10)
                try await Task.sleep(for: .milliseconds(700))
                #expect(fake.received.count == 2)
                _ = await probe.close()

                // The app was removed: APNs answers 410 and the token is deleted.
                fake.state.withLock { _ = $0.unregistered.insert(Self.deviceToken) }
                try await Task.sleep(for: .milliseconds(300))  // the probe's connection is gone
                _ = try await acme.reply("Bye for now", in: sent.conversation.id, as: acme.adminToken)
                _ = try await Self.wait(fake, count: 3)
                try await Task.sleep(for: .milliseconds(300))
                _ = try await acme.reply("Still there?", in: sent.conversation.id, as: acme.adminToken)
                try await Task.sleep(for: .milliseconds(800))
                #expect(fake.received.count == 3)
                #expect(try await server.request(.delete, "/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: .apns, token: Self.deviceToken)).status == .notFound)
            }
        } catch {
            await fake.stop()
            throw error
        }
        await fake.stop()
    }

    static func wait(_ fake: FakeAPNs, count: Int, within seconds: Double = 15) async throws -> FakeAPNs.Received {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let received = fake.received
            if received.count >= count { return received[count - 1] }
            try await Task.sleep(for: .milliseconds(30))
        }
        throw TestFailure("APNs got \(fake.received.count) notifications, expected \(count)")
    }

    @Test("FCM: the service account's JWT is exchanged for an access token once, Android devices get the notification with a collapse key, an UNREGISTERED token is deleted")
    func fcm() async throws {
        let (account, fake) = try await Self.fcmAccount()
        do {
            try await TestServer.run(configure: {
                $0.fcmAPIURL = fake.baseURL
                $0.fcmTokenURL = fake.tokenURL
            }) { server in
                let acme = try await BrandScenario.make(server)
                #expect(try await server.request(.put, "/v1/apps/\(acme.app.id)/push/fcm", token: acme.adminToken, json: ConnectFCMRequest(serviceAccount: "{}"))
                    .error.field == "serviceAccount")
                let connected = try await server.request(.put, "/v1/apps/\(acme.app.id)/push/fcm", token: acme.adminToken, json: ConnectFCMRequest(serviceAccount: account))
                #expect(try connected.decode(PushConnectionDTO.self).topic == "acme-shop-b5ae1")
                #expect(!connected.text.contains("PRIVATE KEY"))

                let (consumerToken, _) = try await acme.consumer(name: "Eli")
                let sent = try await acme.send("Is the blue one back in stock?", as: consumerToken)
                let device = "fcm-registration-token-" + String(repeating: "q", count: 120)
                #expect(try await server.post("/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: .fcm, token: device)).status == .ok)
                _ = try await acme.reply("Yes, since this morning", in: sent.conversation.id, as: acme.adminToken)
                _ = try await acme.reply("Shall I reserve one?", in: sent.conversation.id, as: acme.adminToken)
                let deadline = Date().addingTimeInterval(15)
                while fake.sent.count < 2, Date() < deadline { try await Task.sleep(for: .milliseconds(30)) }
                #expect(fake.sent.count == 2)
                #expect(fake.sent.allSatisfy { $0.token == device && $0.collapseKey == sent.conversation.id.rawValue })
                #expect(fake.sent.first?.body == "New message from \(acme.brand.name)")
                let data = try #require(fake.sent.first?.message["data"] as? [String: Any])
                #expect(ParleyNotification(userInfo: data)?.conversationId == sent.conversation.id)
                #expect(fake.state.withLock { $0.tokenRequests } == 1)  // the access token is reused

                fake.state.withLock { _ = $0.unregistered.insert(device) }
                _ = try await acme.reply("Reserved!", in: sent.conversation.id, as: acme.adminToken)
                while fake.sent.count < 3, Date() < deadline.addingTimeInterval(10) { try await Task.sleep(for: .milliseconds(30)) }
                try await Task.sleep(for: .milliseconds(500))
                #expect(try await server.request(.delete, "/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: .fcm, token: device)).status == .notFound)
            }
        } catch {
            await fake.stop()
            throw error
        }
        await fake.stop()
    }
    @Test("registrations are bounded: no credentials is 409 push_not_configured, tokens have their provider's shape and length, 10 devices per consumer (the oldest replaced), a rate limit; one reply queues at most 10 jobs")
    func registrationLimits() async throws {
        let clock = ManualClock()
        try await TestServer.run(clock: clock) { server in
            let acme = try await BrandScenario.make(server)
            let (consumerToken, consumer) = try await acme.consumer(name: "Flo")
            func register(_ provider: PushProvider, _ token: String) async throws -> TestServer.Reply {
                try await server.post("/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: provider, token: token))
            }
            // The app has no APNs or FCM credentials: nothing to register, nothing stored.
            let before = try await HTTPErrorTests.rowCounts(server)
            for provider in [PushProvider.apns, .fcm] {
                let refused = try await register(provider, provider == .apns ? Self.deviceToken : "fcm-" + String(repeating: "t", count: 150))
                #expect(refused.status == .conflict)
                #expect(try refused.error.code == "push_not_configured")
            }
            #expect(try await HTTPErrorTests.rowCounts(server) == before)

            let key = ES256PrivateKey()
            let credentials = ConnectAPNsRequest(teamId: "ABCDE12345", keyId: "KEY1234567", privateKey: key.pemRepresentation, topic: "com.acme.shop")
            #expect(try await server.request(.put, "/v1/apps/\(acme.app.id)/push/apns", token: acme.adminToken, json: credentials).status == .ok)
            // APNs tokens: hex, 64-200 digits.
            #expect(try await register(.apns, String(repeating: "ab", count: 16)).error.field == "token")
            #expect(try await register(.apns, String(repeating: "ab", count: 2048)).error.field == "token")

            // Twelve devices, a minute apart: the two registered first are replaced.
            let tokens = (0..<12).map { String(format: "%064x", $0 + 1) }
            for token in tokens {
                #expect(try await register(.apns, token).status == .ok)
                clock.advance(by: .seconds(60))
            }
            let kept = try await server.services.store.read { repo in try await repo.pushRegistrations(consumerId: consumer.id) }
            #expect(kept.count == 10)
            #expect(Set(kept.map(\.token)) == Set(tokens.suffix(10)))

            // One reply to a consumer without a connection: one job per device, never more.
            let sent = try await acme.send("Hello", as: consumerToken)
            _ = try await acme.reply("Hi!", in: sent.conversation.id, as: acme.adminToken)
            let deadline = Date().addingTimeInterval(15)
            var queued = 0
            while Date() < deadline {
                queued = try await Self.pushJobs(server)
                if queued >= 10 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await Self.pushJobs(server) == 10)

            // Ten registrations a minute: the eleventh at once is refused until the bucket refills.
            var refused: TestServer.Reply?
            for n in 0..<11 {
                let reply = try await register(.apns, String(format: "%064x", 100 + n))
                if reply.status != .ok { refused = reply; break }
            }
            #expect(refused?.status == .tooManyRequests)
            #expect(try refused?.error.code == "rate_limited")
            clock.advance(by: .seconds(60))
            #expect(try await register(.apns, String(format: "%064x", 999)).status == .ok)
        }
    }

    @Test("FCM tokens: the shape of an FCM registration token, at most 512 characters (a 4 KB token is refused)")
    func fcmTokenShape() async throws {
        try await TestServer.run { server in
            let acme = try await BrandScenario.make(server)
            let (consumerToken, _) = try await acme.consumer(name: "Gus")
            for token in [String(repeating: "x", count: 4096), "short", "has spaces in it and is long enough to count", "slash/" + String(repeating: "y", count: 100)] {
                let reply = try await server.post("/v1/consumer/push", token: consumerToken, json: RegisterPushRequest(provider: .fcm, token: token))
                let field = try reply.error.field
                #expect(reply.status == .badRequest && field == "token", "\(token.prefix(20)): \(reply.status)")
            }
        }
    }

    /// A service account from FCM's documented key file with a new RSA key, and a local FCM that checks it.
    static func fcmAccount() async throws -> (account: String, fake: FakeFCM) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fcm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyFile = directory.appendingPathComponent("key.pem")
        // ProcessRunner (posix_spawn), not Foundation's Process: Process.run() crashed in CI (a bad read
        // inside it) while other tests opened and closed sockets, as it once did in the server.
        _ = try ProcessRunner(executable: "/usr/bin/openssl").runBlocking(
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", keyFile.path], timeout: .seconds(60))
        let pem = try String(contentsOf: keyFile, encoding: .utf8)
        let privateKey = try Insecure.RSA.PrivateKey(pem: pem)
        let account = String(decoding: try FakeFCM.fixture("service-account.json"), as: UTF8.self)
            .replacingOccurrences(of: "\"PRIVATE_KEY\"", with: String(decoding: try JSONEncoder().encode(pem), as: UTF8.self))
        let fake = await FakeFCM.start(publicKey: privateKey.publicKey, clientEmail: "firebase-adminsdk-x1y2z@acme-shop-b5ae1.iam.gserviceaccount.com")
        return (account, fake)
    }

    /// Every `push.send` job in the table, whatever its state.
    static func pushJobs(_ server: TestServer) async throws -> Int {
        try await server.services.store.database.read { db in
            try await db.raw("SELECT COUNT(*) AS n FROM jobs WHERE kind = 'push.send'").first()?.decode(column: "n", as: Int.self) ?? 0
        }
    }
}
