import Foundation
import ParleyServer
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    @Test("defaults: SQLite under ./data on 127.0.0.1:8080")
    func defaults() throws {
        let configuration = try ParleyConfiguration.fromEnvironment([:])
        #expect(configuration.host == "127.0.0.1")
        #expect(configuration.port == 8080)
        #expect(configuration.resolvedDatabaseURL == "sqlite://./data/parley.sqlite")
        #expect(configuration.mediaDirectory == "./data/media")
        try configuration.validate()
    }

    @Test("environment over defaults, flags over environment")
    func precedence() throws {
        var configuration = try ParleyConfiguration.fromEnvironment([
            "PARLEY_PORT": "9000", "PARLEY_DATA_DIR": "/srv/parley", "PARLEY_SECURE_COOKIES": "yes", "PATH": "/bin",
        ])
        #expect(configuration.port == 9000)
        #expect(configuration.resolvedDatabaseURL == "sqlite:///srv/parley/parley.sqlite")
        #expect(configuration.secureCookies)
        try configuration.apply(flag: "port", value: "9100")
        try configuration.apply(flag: "database-url", value: "postgres://parley:secret@db:5432/parley")
        #expect(configuration.port == 9100)
        try configuration.validate()
    }

    @Test("command-line settings: --name value and --name=value, from the one settings table")
    func arguments() throws {
        var configuration = try ParleyConfiguration.fromEnvironment(["PARLEY_PORT": "9000"])
        try configuration.apply(arguments: ["--port", "9100", "--sqlite-synchronous=full", "--allowed-origins", "https://a.example"])
        #expect(configuration.port == 9100)
        #expect(configuration.sqliteFullSync)
        #expect(configuration.allowedOrigins == ["https://a.example"])
        #expect(throws: ConfigurationError.self) { try configuration.apply(arguments: ["--port"]) }
        #expect(throws: ConfigurationError.self) { try configuration.apply(arguments: ["--no-such-setting", "1"]) }
        #expect(throws: ConfigurationError.self) { try configuration.apply(arguments: ["9100"]) }
    }

    @Test("every setting is in --help and in the README's table, and the table has no other")
    func documented() throws {
        let help = ParleyConfiguration.settingsHelp
        let readme = try String(contentsOf: TestServer.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `--") }.map { row in
            row.split(separator: "|").prefix(2).map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
        }
        let documented = Set(rows.map { "\($0[0]) \($0[1])" })
        let settings = Set(ParleyConfiguration.settingNames.map { "--\($0.flag) \($0.environment)" })
        #expect(documented == settings, "README table vs settings: missing \(settings.subtracting(documented)), extra \(documented.subtracting(settings))")
        for name in ParleyConfiguration.settingNames {
            #expect(help.contains("--\(name.flag) <value>   \(name.environment)"))
        }
    }

    @Test("a bad setting stops start-up with a message that names it", arguments: [
        (["PARLEY_PORT": "eighty"], "PARLEY_PORT"),
        (["PARLEY_PORT": "70000"], "PARLEY_PORT"),
        (["PARLEY_LOG_LEVEL": "loud"], "PARLEY_LOG_LEVEL"),
        (["PARLEY_BCRYPT_COST": "2"], "PARLEY_BCRYPT_COST"),
        (["PARLEY_SEED_DEMO": "maybe"], "PARLEY_SEED_DEMO"),
        (["PARLEY_DATA_DIR": ""], "PARLEY_DATA_DIR"),
        (["PARLEY_PROT": "8080"], "PARLEY_PROT"),
        (["PARLEY_TRANSCRIBER_NICE": "20"], "PARLEY_TRANSCRIBER_NICE"),
        (["PARLEY_SQLITE_WAL_MB": "2"], "PARLEY_SQLITE_WAL_MB"),
        (["PARLEY_TRANSCRIBER_NICE": "-1"], "PARLEY_TRANSCRIBER_NICE"),
    ])
    func badSettings(environment: [String: String], setting: String) {
        let error = #expect(throws: ConfigurationError.self) { try ParleyConfiguration.fromEnvironment(environment) }
        #expect(error?.setting == setting)
        #expect(error?.description.contains(setting) == true)
    }

    @Test("the transcriber runs at niceness 10 unless told otherwise")
    func transcriberNiceness() throws {
        #expect(try ParleyConfiguration.fromEnvironment([:]).transcriberNiceness == 10)
        #expect(try ParleyConfiguration.fromEnvironment(["PARLEY_TRANSCRIBER_NICE": "0"]).transcriberNiceness == 0)
    }

    @Test("a bad database URL is named, without its password")
    func badDatabaseURL() throws {
        var configuration = ParleyConfiguration()
        configuration.databaseURL = "mysql://root:hunter2@db/parley"
        let error = #expect(throws: ConfigurationError.self) { try configuration.validate() }
        #expect(error?.setting.contains("PARLEY_DATABASE_URL") == true)
        #expect(error?.description.contains("hunter2") == false)
        #expect(throws: ConfigurationError.self) { try configuration.apply(flag: "colour", value: "red") }
    }
}
