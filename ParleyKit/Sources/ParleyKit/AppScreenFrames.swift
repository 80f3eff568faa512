import Foundation

/// Which frames of the app's screen the chat screen hands its page while the customer shares the
/// app in a call (issue 29). A web view has no `getDisplayMedia`, so the app captures its own
/// windows (`AppScreenCapture`, iOS) and the page (`js/app-screen.js`) draws each frame into the
/// call's shared-screen track. This decides what goes: a frame equal to the last one sent waits
/// (the screen did not change) until `refresh` has passed, so that the call's video never goes
/// quiet; a frame over `maxFrameBytes` is not sent (the page would refuse it). Pure, so that it is
/// tested on every platform; the capture and the web view are the chat screen's.
struct AppScreenFrames: Sendable {
    /// How often the page asks for frames (it says so in `screenShare.start`).
    static let defaultFramesPerSecond = 4
    /// The largest JPEG sent: its data: URL stays under the page's 1.5 MB limit (`APP_SCREEN_MAX_FRAME`).
    static let maxFrameBytes = 1_100_000
    /// An unchanged screen is sent again this often.
    static let refresh = Duration.seconds(1)

    private var last: Data?
    private var lastSent: ContinuousClock.Instant?

    init() {}

    /// The script that hands `jpeg` to the page, or nil when it should not go now.
    mutating func script(for jpeg: Data, at now: ContinuousClock.Instant) -> String? {
        guard !jpeg.isEmpty, jpeg.count <= Self.maxFrameBytes else { return nil }
        if jpeg == last, let lastSent, now - lastSent < Self.refresh { return nil }
        last = jpeg
        lastSent = now
        // Base64 has no quote or backslash: the literal needs no escaping.
        return "parleyApp.screenFrame(\"data:image/jpeg;base64,\(jpeg.base64EncodedString())\")"
    }

    /// The pause between two captures at `framesPerSecond` (the page's request, kept within 1-10).
    static func interval(framesPerSecond: Int?) -> Duration {
        .milliseconds(1000 / max(1, min(10, framesPerSecond ?? defaultFramesPerSecond)))
    }
}
