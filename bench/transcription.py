"""The embedded transcriber on real read speech: word error rate and speed, on the recordings the
tests use (Tests/ParleyMediaTests/Fixtures/speech, LibriVox), each as the server hands it to the
engine (through the Opus rendition: ffmpeg, libopus 24 kbit/s, then 16 kHz WAV) and from the
original. The server's own PocketSphinx call (EmbeddedTranscriber.script, read from its source), one process
per note, timed whole (start-up and model load included, as the server pays them).

    bench/transcription.sh        (installs pocketsphinx into .venv first)
"""
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEECH = ROOT / "Tests" / "ParleyMediaTests" / "Fixtures" / "speech"
SWIFT = ROOT / "Sources" / "ParleyMedia" / "Transcriber.swift"


def server_script():
    """EmbeddedTranscriber.script, read from the server's source: the bench runs what the server runs."""
    source = SWIFT.read_text()
    body = source.split('static let script = """', 1)[1].split('"""', 1)[0]
    lines = body.split("\n")[1:-1]
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return "\n".join(line[indent:] for line in lines) + "\n"


SCRIPT = server_script()


def words(text):
    return [w for w in re.split(r"[^\w']+", text.lower()) if w]


def errors(reference, hypothesis):
    r, h = words(reference), words(hypothesis)
    row = list(range(len(h) + 1))
    for i, rw in enumerate(r):
        previous, row = row, [i + 1] + [0] * len(h)
        for j, hw in enumerate(h):
            row[j + 1] = min(previous[j + 1] + 1, row[j] + 1, previous[j] + (rw != hw))
    return row[len(h)], len(r)


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def main():
    results = {}
    # The engines, each given the same 16 kHz WAV: the server's (PyPI's PocketSphinx 5, as
    # EmbeddedTranscriber runs it) and, when installed, Debian's PocketSphinx 0.8 with its
    # pocketsphinx-en-us model (`apt-get install pocketsphinx pocketsphinx-en-us`), the one the issue
    # started from, by its own command-line tool.
    engines = {"PyPI pocketsphinx 5.1.1 (the server's)": lambda wav: json.loads(
        subprocess.run([sys.executable, "-c", SCRIPT, str(wav)], check=True, capture_output=True, text=True).stdout)["text"]}
    if shutil.which("pocketsphinx_continuous") and Path("/usr/share/pocketsphinx/model/en-us/en-us").is_dir():
        engines["Debian pocketsphinx 0.8 (apt)"] = lambda wav: " ".join(
            subprocess.run(["pocketsphinx_continuous", "-infile", str(wav), "-logfn", "/dev/null"],
                           check=True, capture_output=True, text=True).stdout.split())
    else:
        print("Debian's pocketsphinx_continuous is not installed: measuring the server's engine only")
    with tempfile.TemporaryDirectory() as scratch:
        for engine, transcribe in engines.items():
            for path in ("opus", "original"):
                total_errors = total_words = 0
                audio = spent = cpu = 0.0
                for wav in sorted(SPEECH.glob("*.wav")):
                    source = wav
                    if path == "opus":
                        source = Path(scratch) / (wav.stem + ".ogg")
                        ffmpeg("-i", str(wav), "-ac", "1", "-ar", "48000", "-c:a", "libopus", "-b:a", "24k", "-application", "voip", str(source))
                    prepared = Path(scratch) / (wav.stem + ".16k.wav")
                    ffmpeg("-i", str(source), "-ac", "1", "-ar", "16000", "-c:a", "pcm_s16le", "-f", "wav", str(prepared))
                    audio += (prepared.stat().st_size - 44) / 32000
                    started = time.perf_counter()
                    before = resource.getrusage(resource.RUSAGE_CHILDREN)
                    heard = transcribe(prepared)
                    after = resource.getrusage(resource.RUSAGE_CHILDREN)
                    spent += time.perf_counter() - started
                    cpu += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                    e, n = errors(wav.with_suffix(".txt").read_text(), heard)
                    total_errors, total_words = total_errors + e, total_words + n
                    print(f"{engine[:6]} {path:8} {wav.stem}: {e}/{n}  {heard}")
                results[(engine, path)] = (total_errors, total_words, audio, spent, cpu)
    print()
    print("| engine | input | word error rate | errors / words | audio (s) | engine time (s) | engine CPU (s) | real-time factor (CPU s per audio s) | times faster than real time |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (engine, path), (e, n, audio, spent, cpu) in results.items():
        print(f"| {engine} | {path} | {e / n:.1%} | {e} / {n} | {audio:.1f} | {spent:.2f} | {cpu:.2f} | {cpu / audio:.2f} | {audio / spent:.1f} |")

if __name__ == "__main__":
    main()
