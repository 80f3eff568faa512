import Foundation
import HTTPTypes
import ParleyAPI
import ParleyServer
import Testing

@Suite("Rate limits")
struct RateLimitTests {
    @Test("a token bucket allows a burst, then one action per interval, and says how long to wait")
    func bucket() async {
        let buckets = LocalTokenBuckets()
        let start = ContinuousClock.now
        #expect((0..<3).map { _ in buckets.take("a", limit: 3, per: .seconds(60), now: start) } == [nil, nil, nil])
        #expect(buckets.take("a", limit: 3, per: .seconds(60), now: start) == 20)
        #expect(buckets.take("b", limit: 3, per: .seconds(60), now: start) == nil)  // keys are independent
        #expect(buckets.take("a", limit: 3, per: .seconds(60), now: start + .seconds(19)) == 1)
        #expect(buckets.take("a", limit: 3, per: .seconds(60), now: start + .seconds(21)) == nil)
        #expect(await RateLimiter(name: "off", limit: 0, per: .seconds(1), buckets: buckets).take("a") == nil)
    }

    @Test("a consumer flooding messages gets 429 with Retry-After over HTTP and over the WebSocket; nothing is stored")
    func consumerFlood() async throws {
        // Buckets refill on the server's clock (one message every 12 s here): a clock that stands
        // still makes the count exact however slow the machine is.
        try await TestServer.run(clock: ManualClock(), configure: { $0.rateConsumerMessages = 5 }) { server in
            let acme = try await BrandScenario.make(server)
            let (token, _) = try await acme.consumer()
            let (otherToken, _) = try await acme.consumer()
            var created = 0
            var refusedReply: TestServer.Reply?
            for index in 0..<12 where refusedReply == nil {
                let reply = try await server.post(
                    "/v1/consumer/messages", token: token, json: SendMessageRequest(clientMessageId: "m\(index)", text: "flood \(index)"))
                if reply.status == .created { created += 1 } else { refusedReply = reply }
            }
            #expect(created == 5)
            let refused = try #require(refusedReply)
            #expect(refused.status == .tooManyRequests)
            #expect(try refused.error.code == "rate_limited")
            let retryAfter = try #require(refused.headers[.retryAfter].flatMap(Int.init))
            #expect((1...12).contains(retryAfter))
            #expect(try refused.error.retryAfter == retryAfter)
            // Nothing refused was stored.
            let conversations = try await server.get("/v1/consumer/conversations", token: token).decode(ListResponse<ConversationDTO>.self)
            #expect(conversations.items.first?.lastSeq == Int64(created))
            // Another consumer is not affected.
            #expect(try await server.post(
                "/v1/consumer/messages", token: otherToken, json: SendMessageRequest(clientMessageId: "o1", text: "hello")).status == .created)
            // The same bucket covers the WebSocket.
            // (Sent until refused, as a client would.)
            let socket = try await RealtimeProbe.connect(port: server.port, token: token)
            var refusal: ErrorBody.Detail?
            for index in 0..<3 where refusal == nil {
                try socket.send(.send(id: "w\(index)", SendMessageRequest(clientMessageId: "w\(index)", text: "over the socket")))
                let answer = try await socket.next(within: 15) { frame in
                    switch frame {
                    case .error, .ack: true
                    default: false
                    }
                }
                if case .error(_, let detail) = answer { refusal = detail }
            }
            let detail = try #require(refusal)
            #expect(detail.code == "rate_limited")
            #expect(detail.retryAfter != nil)
            await socket.close()
        }
    }

    @Test("sign-in attempts are limited per address and per account, before the password is checked")
    func logins() async throws {
        // On a clock that stands still, so that no bucket refills however slow the machine is.
        try await TestServer.run(clock: ManualClock(), configure: { $0.rateLogins = 8 }) { server in
            // One sign-in here: 7 left for the address, 3 for the admin's account.
            let acme = try await BrandScenario.make(server)
            // The account limit (half the address limit, per 5 minutes) stops guessing one password.
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<4 {
                statuses.append(try await server.post(
                    "/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: "wrong guess")).status)
            }
            #expect(statuses == [.unauthorized, .unauthorized, .unauthorized, .tooManyRequests])
            // Even the right password waits now.
            let right = try await server.post("/v1/auth/login", json: LoginRequest(email: acme.admin.email, password: acme.adminPassword))
            #expect(right.status == .tooManyRequests)
            #expect(right.headers[.retryAfter] != nil)
            // The address limit (8 a minute, refilled continuously) covers other accounts from the same
            // address: within a few more attempts it refuses.
            var others: [HTTPResponse.Status] = []
            for index in 0..<10 where others.last != .tooManyRequests {
                others.append(try await server.post("/v1/auth/login", json: LoginRequest(email: "nobody\(index)@acme.test", password: "x")).status)
            }
            #expect(others.last == .tooManyRequests)
            #expect(others.dropLast().allSatisfy { $0 == .unauthorized })
            #expect(others.count <= 6)
        }
    }

    @Test("writes from one address are limited across consumers")
    func perAddress() async throws {
        // A clock that stands still: the buckets do not refill while the test runs, however slow
        // the machine (it used to race real time and let one or two more through under load).
        let clock = ManualClock()
        try await TestServer.run(clock: clock, configure: { $0.rateIPWrites = 6 }) { server in
            let acme = try await BrandScenario.make(server)
            let (ana, _) = try await acme.consumer()  // new sessions count as writes: 1
            let (ben, _) = try await acme.consumer()  // 2
            for index in 0..<3 {  // 3, 4, 5
                #expect(try await server.post("/v1/consumer/messages", token: ana, json: SendMessageRequest(clientMessageId: "a\(index)", text: "hi")).status == .created)
            }
            // Ben has no limit of his own here, but his address runs out: one more, then 429.
            var benStatuses: [HTTPResponse.Status] = []
            var refused: TestServer.Reply?
            for index in 0..<5 where refused == nil {
                let reply = try await server.post("/v1/consumer/messages", token: ben, json: SendMessageRequest(clientMessageId: "b\(index)", text: "hi"))
                benStatuses.append(reply.status)
                if reply.status == .tooManyRequests { refused = reply }
            }
            #expect(benStatuses == [.created, .tooManyRequests])
            #expect(refused?.headers[.retryAfter] != nil)
            // Agents are not limited by consumers' traffic.
            let conversation = try await server.get("/v1/consumer/conversations", token: ben).decode(ListResponse<ConversationDTO>.self).items[0]
            #expect(try await acme.reply("hello Ben", in: conversation.id, as: acme.adminToken).created)
        }
    }

    @Test("new anonymous sessions are limited per address")
    func sessions() async throws {
        try await TestServer.run(clock: ManualClock(), configure: { $0.rateConsumerSessions = 3 }) { server in
            let acme = try await BrandScenario.make(server)
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<6 where statuses.last != .tooManyRequests {
                statuses.append(try await server.post("/v1/consumer/session", json: ConsumerSessionRequest(appId: acme.app.id)).status)
            }
            // The server's clock stands still (a slow machine once saw a session come back): three, then 429.
            #expect(statuses == [.created, .created, .created, .tooManyRequests], "\(statuses)")
        }
    }
}
