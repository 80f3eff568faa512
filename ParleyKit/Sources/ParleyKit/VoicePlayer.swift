import Foundation
import Observation
import ParleyAPI

/// Where a voice note's audio plays. ParleyKit has two: `AudioPlayerOutput` (AVFoundation's
/// AVAudioPlayer) on Apple platforms, and `ClockVoiceOutput`, which plays nothing and keeps time
/// (Linux, command-line tools, tests that move a clock).
public protocol VoiceOutput: AnyObject, Sendable {
    /// Takes the audio (the AAC rendition's bytes); returns its length when the output can tell.
    func load(_ audio: Data) async throws -> Duration?
    /// Plays from `position` at `rate` (1 normal, up to 2).
    func play(from position: Duration, rate: Double) async throws
    func pause() async
    /// Where playing is now; at the end when it finished.
    func position() async -> Duration
    /// Whether it is playing now (false once it reached the end by itself).
    func isPlaying() async -> Bool
}

/// Plays one voice note at a time and says where it is, for a player row: play and pause, seek,
/// speed, position and the server's waveform and length (known before any audio is fetched).
/// Bind a view to it (`@Observable`); call `tick()` while playing (a `TimelineView` or a timer)
/// so that `position` moves.
@MainActor @Observable
public final class VoiceNotePlayer {
    public enum State: Sendable, Equatable {
        case idle
        /// Fetching the audio (cached on the device once fetched).
        case loading
        case playing
        case paused
        /// Played to its end.
        case ended
        /// The audio could not be fetched or played; the sentence says why.
        case failed(String)
    }

    /// The note loaded (nil: none yet).
    public private(set) var message: MessageDTO?
    public private(set) var state: State = .idle
    public private(set) var position: Duration = .zero
    /// The server's length of the note (`voice.durationMs`), or the output's once loaded.
    public private(set) var duration: Duration = .zero
    /// The server's waveform: 0...1 per bar, for drawing before and while playing.
    public private(set) var waveform: [Double] = []
    /// 1, 1.5 or 2.
    public private(set) var rate: Double = 1

    /// How far through, 0...1, for the waveform's played part.
    public var progress: Double {
        let total = Self.seconds(duration)
        return total > 0 ? min(1, Self.seconds(position) / total) : 0
    }

    private let parley: Parley
    private let output: any VoiceOutput
    private var loaded: MessageID?

    public init(parley: Parley, output: any VoiceOutput) {
        self.parley = parley
        self.output = output
    }

    /// Plays `message` (a voice note) from where it was, or from the start when it is another
    /// note than the one loaded or it had ended.
    public func play(_ message: MessageDTO) async {
        guard let voice = message.voice else {
            state = .failed("This message is not a voice note.")
            return
        }
        if loaded != message.id {
            await output.pause()
            self.message = message
            (loaded, position) = (nil, .zero)
            waveform = voice.waveform.map { Double($0) / 255 }
            duration = .milliseconds(voice.durationMs)
            state = .loading
            do {
                let audio = try await parley.voiceAudio(for: message)
                if let length = try await output.load(audio), duration == .zero { duration = length }
                loaded = message.id
            } catch {
                state = .failed("The voice note could not be loaded: \(error)")
                return
            }
        }
        if state == .ended { position = .zero }
        do {
            try await output.play(from: position, rate: rate)
            state = .playing
        } catch {
            state = .failed("The voice note could not be played: \(error)")
        }
    }

    public func pause() async {
        guard state == .playing else { return }
        await output.pause()
        position = await output.position()
        state = .paused
    }

    /// Moves to `fraction` (0...1) of the note, playing on if it was playing.
    public func seek(to fraction: Double) async {
        let target = Duration.milliseconds(Int64(max(0, min(1, fraction)) * Self.seconds(duration) * 1000))
        position = target
        if state == .ended { state = .paused }
        if state == .playing { try? await output.play(from: target, rate: rate) }
    }

    /// 1, 1.5 or 2 (anything else is the nearest of them).
    public func setRate(_ rate: Double) async {
        self.rate = [1, 1.5, 2].min { abs($0 - rate) < abs($1 - rate) } ?? 1
        if state == .playing {
            position = await output.position()
            try? await output.play(from: position, rate: self.rate)
        }
    }

    /// Reads the output's position (call it while playing); at the end the state is `ended`.
    public func tick() async {
        guard state == .playing else { return }
        let now = await output.position()
        let playing = await output.isPlaying()
        if (duration > .zero && now >= duration) || !playing {
            await output.pause()
            position = duration > .zero ? duration : now
            state = .ended
        } else {
            position = now
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// An output that plays nothing and keeps time on a clock: for Linux and command-line tools, where
/// ParleyKit has no audio output, and for tests, which move `now` instead of waiting.
public final class ClockVoiceOutput: VoiceOutput {
    private struct State {
        var length: Duration?
        var playing = false
        var rate = 1.0
        var from = Duration.zero
        var since: ContinuousClock.Instant?
        var audio: Data?
    }

    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Locked(State())
    /// The length to report for audio it is given (its own cannot be read without a decoder).
    private let lengthOf: @Sendable (Data) -> Duration?

    public init(now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }, lengthOf: @escaping @Sendable (Data) -> Duration? = { _ in nil }) {
        self.now = now
        self.lengthOf = lengthOf
    }

    /// The audio last loaded (what a real output would play).
    public var audio: Data? { state.withLock { $0.audio } }

    public func load(_ audio: Data) async throws -> Duration? {
        let length = lengthOf(audio)
        state.withLock { $0 = State(length: length, audio: audio) }
        return length
    }

    public func play(from position: Duration, rate: Double) async throws {
        let at = now()
        state.withLock { state in
            (state.playing, state.from, state.since, state.rate) = (true, position, at, rate)
        }
    }

    public func pause() async {
        let position = await self.position()
        state.withLock { state in
            (state.playing, state.from, state.since) = (false, position, nil)
        }
    }

    public func position() async -> Duration {
        let at = now()
        return state.withLock { state in
            var position = state.from
            if state.playing, let since = state.since { position += (at - since) * state.rate }
            if let length = state.length { position = min(position, length) }
            return position
        }
    }

    public func isPlaying() async -> Bool {
        let position = await self.position()
        return state.withLock { state in
            guard state.playing else { return false }
            if let length = state.length { return position < length }
            return true
        }
    }
}

#if canImport(AVFoundation) && !os(watchOS)
import AVFoundation

/// The device's speaker or headphones, through AVAudioPlayer (which plays the AAC rendition),
/// with its rate enabled for 1.5x and 2x.
public final class AudioPlayerOutput: VoiceOutput, @unchecked Sendable {
    // AVAudioPlayer is used from the main actor only (every call hops there).
    private var player: AVAudioPlayer?

    public init() {}

    public func load(_ audio: Data) async throws -> Duration? {
        try await MainActor.run {
            let player = try AVAudioPlayer(data: audio)
            player.enableRate = true
            player.prepareToPlay()
            self.player = player
            return .milliseconds(Int64(player.duration * 1000))
        }
    }

    public func play(from position: Duration, rate: Double) async throws {
        try await MainActor.run {
            guard let player else { throw ParleyKitError.notAvailable("no voice note is loaded") }
            #if os(iOS) || os(visionOS)
            try AVAudioSession.sharedInstance().setCategory(.playback, mode: .spokenAudio)
            try AVAudioSession.sharedInstance().setActive(true)
            #endif
            player.currentTime = VoiceNotePlayer.seconds(position)
            player.rate = Float(rate)
            guard player.play() else { throw ParleyKitError.notAvailable("the audio output could not start") }
        }
    }

    public func pause() async {
        await MainActor.run { player?.pause() }
    }

    public func position() async -> Duration {
        await MainActor.run { .milliseconds(Int64((player?.currentTime ?? 0) * 1000)) }
    }

    public func isPlaying() async -> Bool {
        await MainActor.run { player?.isPlaying ?? false }
    }
}
#endif
