import AsyncHTTPClient
import Foundation
import MultipartKit
import NIOCore
import ParleyMedia

/// Any endpoint that speaks OpenAI's `POST /v1/audio/transcriptions` (whisper.cpp's server,
/// faster-whisper servers, hosted providers): the note as 16 kHz WAV in a multipart form with the
/// model, the language and `response_format=verbose_json`, whose segments say how sure the model was
/// (https://platform.openai.com/docs/api-reference/audio/createTranscription). The exchange has the
/// provider client's deadline; 5xx, 429 and no answer are retried by the job, other refusals are not.
struct OpenAITranscriber: Transcriber {
    let http: ProviderHTTP
    /// The base URL; `/v1/audio/transcriptions` is added.
    let baseURL: String
    let model: String
    let apiKey: String?

    var name: String { "openai" }

    /// Whisper models take any language they were trained on; the endpoint says when it does not.
    func supports(language: String) -> Bool { true }

    /// What the reference documents of a `verbose_json` answer, as far as Parley reads it.
    struct Verbose: Decodable {
        struct Segment: Decodable {
            var avg_logprob: Double?
            var no_speech_prob: Double?
        }
        var text: String
        var segments: [Segment]?
    }

    /// The reference's own thresholds: a segment whose average log-probability is under -1 "failed",
    /// one whose no-speech probability is over 0.6 is likely silence.
    static func lowConfidence(_ answer: Verbose) -> Bool {
        let segments = answer.segments ?? []
        guard !segments.isEmpty else { return false }
        let logprobs = segments.compactMap(\.avg_logprob)
        let meanLogprob = logprobs.isEmpty ? 0 : logprobs.reduce(0, +) / Double(logprobs.count)
        let silent = segments.allSatisfy { ($0.no_speech_prob ?? 0) > 0.6 }
        return meanLogprob < -1 || silent
    }

    func transcribe(wav: URL, language: String, durationMs: Int) async throws(TranscriptionFailure) -> Transcription {
        let audio: Data
        do {
            audio = try Data(contentsOf: wav)
        } catch {
            throw TranscriptionFailure("the prepared audio could not be read: \(error)", retryable: true)
        }
        let boundary = "parley-\(UUID().uuidString)"
        func field(_ name: String, _ value: String) -> MultipartPart {
            MultipartPart(headers: ["Content-Disposition": "form-data; name=\"\(name)\""], body: ByteBuffer(string: value))
        }
        let parts = [
            MultipartPart(
                headers: ["Content-Disposition": "form-data; name=\"file\"; filename=\"note.wav\"", "Content-Type": "audio/wav"],
                body: ByteBuffer(data: audio)),
            field("model", model), field("language", language), field("response_format", "verbose_json"), field("temperature", "0"),
        ]
        var body = ByteBuffer()
        do {
            try MultipartSerializer().serialize(parts: parts, boundary: boundary, into: &body)
        } catch {
            throw TranscriptionFailure("the request could not be written: \(error)", retryable: false)
        }
        var request = HTTPClientRequest(url: baseURL.trimmingSuffix("/") + "/v1/audio/transcriptions")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "multipart/form-data; boundary=\(boundary)")
        if let apiKey { request.headers.add(name: "Authorization", value: "Bearer \(apiKey)") }
        request.body = .bytes(body)
        let answer: ProviderHTTP.Answer
        do {
            answer = try await http.send(request, maxBytes: 1024 * 1024)
        } catch let failure as ProviderHTTP.Failure {
            throw TranscriptionFailure("the transcription endpoint: \(failure)", retryable: true)
        } catch {
            throw TranscriptionFailure("the transcription endpoint: \(error)", retryable: true)
        }
        guard (200..<300).contains(answer.status) else {
            let retryable = answer.status == 429 || answer.status >= 500
            let detail = String(decoding: answer.body.prefix(300), as: UTF8.self)
            throw TranscriptionFailure("the transcription endpoint answered \(answer.status): \(detail)", retryable: retryable)
        }
        guard let verbose = try? JSONDecoder().decode(Verbose.self, from: answer.body) else {
            throw TranscriptionFailure("the transcription endpoint's answer was not understood", retryable: false)
        }
        return Transcription(
            text: verbose.text.trimmingCharacters(in: .whitespacesAndNewlines), language: language, lowConfidence: Self.lowConfidence(verbose))
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        var trimmed = self
        while trimmed.hasSuffix(suffix) { trimmed.removeLast(suffix.count) }
        return trimmed
    }
}
