import Foundation

/// A finished recording, for `Parley.sendVoice(_:)`.
public struct VoiceRecording: Sendable, Hashable {
    public let file: URL
    public let contentType: String
    /// Pauses not counted.
    public let duration: Duration

    public init(file: URL, contentType: String, duration: Duration) {
        self.file = file
        self.contentType = contentType
        self.duration = duration
    }
}

/// Records a voice note, up to the brand's limit (`Parley.settings().voiceMaxSeconds`): start,
/// pause and resume, a level meter, then `stop()` hands over the file. ParleyKit has two:
/// `AudioRecorder` (AVFoundation, AAC in M4A, mono) on Apple platforms, and `FileVoiceRecorder`,
/// which "records" an existing file (Linux, command-line tools, tests).
///
/// ```swift
/// let limit = try await parley.settings().voiceMaxSeconds
/// try await recorder.start(limit: .seconds(limit))
/// // ... show recorder.level() and recorder.elapsed() ...
/// try await parley.sendVoice(try await recorder.stop())
/// ```
public protocol VoiceRecorder: Sendable {
    /// Starts a new recording; it ends by itself at `limit`.
    func start(limit: Duration) async throws
    func pause() async
    func resume() async throws
    /// Ends the recording and hands it over (the part up to `limit`).
    func stop() async throws -> VoiceRecording
    /// Ends the recording and deletes it.
    func cancel() async
    /// The input's level now, from 0 (silence) to 1, for a meter.
    func level() async -> Float
    /// How long the recording is so far, pauses not counted, at most the limit.
    func elapsed() async -> Duration
}

/// The recorder's states, shared by both recorders: what is allowed when.
enum RecorderState: Sendable, Equatable {
    case idle
    case recording
    case paused
}

/// A recorder over an existing audio file: the time between `start` and `stop` (pauses not
/// counted, at most the limit) is the recording's duration, and `stop` hands over a copy of the
/// file. For Linux and command-line tools (`parley chat`'s `/voice`), where there is no microphone
/// API, and for tests, which move `now` instead of waiting.
public final class FileVoiceRecorder: VoiceRecorder {
    private struct State {
        var phase = RecorderState.idle
        var limit = Duration.seconds(120)
        var recorded = Duration.zero
        var since: ContinuousClock.Instant?
    }

    let source: URL
    let contentType: String
    private let now: @Sendable () -> ContinuousClock.Instant
    private let meter: @Sendable (Duration) -> Float
    private let state = Locked(State())

    /// `now` is the clock (tests pass one they move); `meter` gives the level at a point of the
    /// recording (by default a steady 0.5 while recording).
    public init(
        source: URL, contentType: String = "audio/mp4", now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        meter: @escaping @Sendable (Duration) -> Float = { _ in 0.5 }
    ) {
        self.source = source
        self.contentType = contentType
        self.now = now
        self.meter = meter
    }

    public func start(limit: Duration) async throws {
        guard FileManager.default.isReadableFile(atPath: source.path) else { throw ParleyKitError.notAvailable("\(source.lastPathComponent) cannot be read") }
        guard limit > .zero else { throw ParleyKitError.invalid("the limit must be more than zero") }
        let at = now()
        try state.withLock { state throws(ParleyKitError) in
            guard state.phase == .idle else { throw ParleyKitError.invalid("a recording is already under way") }
            state = State(phase: .recording, limit: limit, recorded: .zero, since: at)
        }
    }

    public func pause() async {
        let at = now()
        state.withLock { state in
            guard state.phase == .recording, let since = state.since else { return }
            state.recorded = min(state.limit, state.recorded + (at - since))
            state.phase = .paused
            state.since = nil
        }
    }

    public func resume() async throws {
        let at = now()
        try state.withLock { state throws(ParleyKitError) in
            guard state.phase == .paused else { throw ParleyKitError.invalid("only a paused recording resumes") }
            state.phase = .recording
            state.since = at
        }
    }

    public func stop() async throws -> VoiceRecording {
        let duration = await elapsed()
        try state.withLock { state throws(ParleyKitError) in
            guard state.phase != .idle else { throw ParleyKitError.invalid("nothing is being recorded") }
            state = State()
        }
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("parley-voice-\(UUID().uuidString).\(source.pathExtension)")
        try FileManager.default.copyItem(at: source, to: copy)
        return VoiceRecording(file: copy, contentType: contentType, duration: duration)
    }

    public func cancel() async {
        state.withLock { $0 = State() }
    }

    public func level() async -> Float {
        let (recording, position) = (state.withLock { $0.phase == .recording }, await elapsed())
        guard recording, position < state.withLock({ $0.limit }) else { return 0 }
        return max(0, min(1, meter(position)))
    }

    public func elapsed() async -> Duration {
        let at = now()
        return state.withLock { state in
            var total = state.recorded
            if state.phase == .recording, let since = state.since { total += at - since }
            return min(total, state.limit)
        }
    }
}

#if canImport(AVFoundation) && !os(watchOS)
import AVFoundation

/// The microphone, through AVAudioRecorder: AAC in an M4A file, mono, 44.1 kHz, 64 kbit/s (what
/// Parley's voice pipeline and every channel take), with metering. On iOS it asks for the
/// microphone (the app's Info.plist needs `NSMicrophoneUsageDescription`) and sets the audio
/// session to play and record.
public actor AudioRecorder: VoiceRecorder {
    private let directory: URL
    private var recorder: AVAudioRecorder?
    private var phase = RecorderState.idle
    private var limit = Duration.seconds(120)

    public init(directory: URL = FileManager.default.temporaryDirectory) {
        self.directory = directory
    }

    public func start(limit: Duration) async throws {
        guard phase == .idle else { throw ParleyKitError.invalid("a recording is already under way") }
        #if os(iOS) || os(visionOS)
        let session = AVAudioSession.sharedInstance()
        let granted = await withCheckedContinuation { continuation in
            session.requestRecordPermission { continuation.resume(returning: $0) }
        }
        guard granted else { throw ParleyKitError.notAvailable("the microphone is not allowed for this app") }
        try session.setCategory(.playAndRecord, mode: .default, options: [.defaultToSpeaker, .allowBluetooth])
        try session.setActive(true)
        #endif
        let file = directory.appendingPathComponent("parley-voice-\(UUID().uuidString).m4a")
        let settings: [String: Any] = [
            AVFormatIDKey: Int(kAudioFormatMPEG4AAC), AVSampleRateKey: 44_100, AVNumberOfChannelsKey: 1, AVEncoderBitRateKey: 64_000,
            AVEncoderAudioQualityKey: AVAudioQuality.high.rawValue,
        ]
        let recorder = try AVAudioRecorder(url: file, settings: settings)
        recorder.isMeteringEnabled = true
        guard recorder.record(forDuration: Self.seconds(limit)) else { throw ParleyKitError.notAvailable("the microphone could not start") }
        (self.recorder, self.limit, phase) = (recorder, limit, .recording)
    }

    public func pause() {
        guard phase == .recording, let recorder else { return }
        recorder.pause()
        phase = .paused
    }

    public func resume() throws {
        guard phase == .paused, let recorder else { throw ParleyKitError.invalid("only a paused recording resumes") }
        guard recorder.record() else { throw ParleyKitError.notAvailable("the microphone could not resume") }
        phase = .recording
    }

    public func stop() throws -> VoiceRecording {
        guard phase != .idle, let recorder else { throw ParleyKitError.invalid("nothing is being recorded") }
        // At the limit AVAudioRecorder has stopped by itself (and its currentTime is back to 0).
        let duration = recorder.isRecording || phase == .paused ? Duration.seconds(recorder.currentTime) : limit
        recorder.stop()
        self.recorder = nil
        phase = .idle
        return VoiceRecording(file: recorder.url, contentType: "audio/mp4", duration: min(duration, limit))
    }

    public func cancel() {
        recorder?.stop()
        recorder?.deleteRecording()
        recorder = nil
        phase = .idle
    }

    public func level() -> Float {
        guard phase == .recording, let recorder, recorder.isRecording else { return 0 }
        recorder.updateMeters()
        // averagePower is in dBFS (-160...0): 60 dB of range onto 0...1.
        return max(0, min(1, (recorder.averagePower(forChannel: 0) + 60) / 60))
    }

    public func elapsed() -> Duration {
        guard let recorder else { return .zero }
        return recorder.isRecording || phase == .paused ? min(.seconds(recorder.currentTime), limit) : limit
    }

    private static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
#endif
