import Foundation
@testable import ParleyKit
import Testing

/// What ParleyKit's chat screen hands its page while a customer shares the app's screens in a
/// call (issue 29): the page's side is e2e/test_calls.py's `test_screen_share_from_an_app`.
@Suite("ParleyKit: the app's screen frames for a call's screen share")
struct AppScreenFramesTests {
    let start = ContinuousClock.now

    @Test("a changed screen goes at once; an unchanged one waits for the refresh, then goes again")
    func unchangedFramesWait() throws {
        var frames = AppScreenFrames()
        let one = Data([0xFF, 0xD8, 0xFF, 0x01]), two = Data([0xFF, 0xD8, 0xFF, 0x02])
        let sent = frames.script(for: one, at: start)
        let first = try #require(sent)
        #expect(first == "parleyApp.screenFrame(\"data:image/jpeg;base64,\(one.base64EncodedString())\")")
        #expect(frames.script(for: one, at: start + .milliseconds(250)) == nil)
        #expect(frames.script(for: one, at: start + .milliseconds(999)) == nil)
        #expect(frames.script(for: two, at: start + .milliseconds(1_000)) != nil)
        #expect(frames.script(for: two, at: start + .milliseconds(1_500)) == nil)
        // Unchanged for a second: sent again, so that the call's video does not go quiet.
        #expect(frames.script(for: two, at: start + .milliseconds(2_000)) == first.replacingOccurrences(of: one.base64EncodedString(), with: two.base64EncodedString()))
    }

    @Test("an empty frame and a frame over the page's limit are not sent")
    func limits() {
        var frames = AppScreenFrames()
        #expect(frames.script(for: Data(), at: start) == nil)
        #expect(frames.script(for: Data(count: AppScreenFrames.maxFrameBytes + 1), at: start) == nil)
        let largest = frames.script(for: Data(count: AppScreenFrames.maxFrameBytes), at: start)
        // Its data: URL stays under the page's APP_SCREEN_MAX_FRAME (1,500,000 characters).
        #expect(largest != nil)
        #expect((largest?.count ?? .max) - "parleyApp.screenFrame(\"\")".count < 1_500_000)
        let page = (try? String(contentsOf: TestServer.repositoryRoot.appendingPathComponent("Public/js/app-screen.js"), encoding: .utf8)) ?? ""
        #expect(page.contains("APP_SCREEN_MAX_FRAME = 1_500_000"))
        #expect(page.contains("APP_SCREEN_FPS = \(AppScreenFrames.defaultFramesPerSecond);"))
    }

    @Test("the page's frame rate is kept within 1-10 a second")
    func interval() {
        #expect(AppScreenFrames.interval(framesPerSecond: nil) == .milliseconds(250))
        #expect(AppScreenFrames.interval(framesPerSecond: 4) == .milliseconds(250))
        #expect(AppScreenFrames.interval(framesPerSecond: 0) == .milliseconds(1000))
        #expect(AppScreenFrames.interval(framesPerSecond: 1_000) == .milliseconds(100))
    }
}
