import AsyncHTTPClient
import Foundation
import Hummingbird
import HummingbirdCore
import NIOCore
import HummingbirdWebSocket
import Logging
import ParleyAPI
import ParleyDomain
import ParleyMedia
import ParleyStore
import ServiceLifecycle
import UnixSignals

/// Everything a running Parley needs, built once and shared by the routes.
public struct ParleyServices: Sendable {
    public let configuration: ParleyConfiguration
    public let store: Store
    public let bus: any EventBus
    public let hub: RealtimeHub
    /// Who is connected: this node's hub, or the whole cluster's (`ClusterPresence`).
    public let presence: any PresenceDirectory
    /// What a node of several runs besides (the cluster's bus and presence); empty on one node.
    public let cluster: [any Service]
    public let metrics: ParleyMetrics
    public let identity: IdentityService
    public let conversations: ConversationService
    public let voice: VoiceService
    public let brandSettings: BrandSettingsService
    public let voiceProcessor: VoiceProcessor
    public let blobs: any BlobStore
    public let calls: CallService
    public let cobrowse: CobrowseService
    public let workspace: WorkspaceService
    public let whatsapp: WhatsAppChannel
    public let messenger: MessengerChannel
    public let sms: SMSChannel
    public let apple: AppleChannel
    public let push: PushService
    public let activity: ActivityService
    public let routing: RoutingService
    public let lifecycle: LifecycleService
    public let transcripts: TranscriptService
    public let records: RecordsService
    public let reports: ReportsService
    let links: SharedLinks
    /// Runs durable jobs (channel delivery, media fetches, webhook processing).
    public let jobRunner: JobRunner
    /// Calls to providers; shut down by `close()`.
    let httpClient: HTTPClient
    /// Calls to the object store, when media is in one.
    let objectStoreClient: HTTPClient?
    public let attachments: AttachmentService
    public let scanning: MalwareScanning
    public let limits: RateLimits
    /// Open connections per client address (the connection guard's count).
    public let connections: ConnectionCounter
    public let searchIndexer: SearchIndexer
    public let janitor: MediaJanitor
    /// Closes connections whose sessions another process revoked.
    public let revocations: SessionRevocations
    /// The requests in progress, and the cut at shutdown (`DrainDeadline`).
    public let drain: Drain
    /// What time it is for every service (a manual clock in tests of timers and expiry).
    public let clock: any WallClock

    /// Opens the database, applies migrations and wires the services together. `wrapDatabase`: what
    /// the services use instead of the database opened (tests record the statements run).
    public static func make(
        configuration: ParleyConfiguration, metrics: ParleyMetrics = ParleyMetrics(), bus given: (any EventBus)? = nil,
        clock: any WallClock = SystemClock(), wrapDatabase: @Sendable (any DatabaseClient) -> any DatabaseClient = { $0 },
        transcriber givenTranscriber: (any Transcriber)? = nil, logger: Logger
    ) async throws -> ParleyServices {
        try configuration.validate()
        var configuration = configuration
        configuration.publicDirectory = try PublicPages.locate(named: configuration.publicDirectory)
        try DataDirectory.prepare(configuration.dataDirectory)
        let location = try DatabaseLocation(url: configuration.resolvedDatabaseURL)
        let database = wrapDatabase(
            try await openDatabase(
                location, fullSync: configuration.sqliteFullSync, walMegabytes: configuration.sqliteWALMegabytes, poolSize: configuration.databasePoolSize,
                logger: logger))
        do {
            try await Migrations.apply(to: database, logger: logger)
        } catch {
            await database.close()
            throw error
        }
        let store = Store(database: database)
        let secrets: SecretBox
        do {
            secrets = try SecretBox.load(configuration)
            // The transcription endpoint's key may be given sealed (`parley seal`), as channel
            // secrets are stored: opened here, held only in memory.
            if let key = configuration.transcriptionAPIKey, key.hasPrefix("v1:") {
                do {
                    configuration.transcriptionAPIKey = try secrets.open(key)
                } catch {
                    throw ConfigurationError(
                        setting: "PARLEY_TRANSCRIPTION_API_KEY",
                        message: "is sealed (v1:) but no secret key opens it; seal it again with `parley seal` and the current PARLEY_SECRET_KEY")
                }
            }
        } catch {
            await database.close()
            throw error
        }
        // Per-client limits: per node on one node, in PostgreSQL for a cluster (docs/cluster.md).
        let sharedBuckets = configuration.cluster ? SharedTokenBuckets(store: store, clock: clock, logger: logger) : nil
        let limits = RateLimits(configuration, clock: clock, shared: sharedBuckets)
        // Media: local disk (the embedded default), or an S3-compatible store every node shares.
        let local = try LocalBlobStore(root: URL(fileURLWithPath: configuration.mediaDirectory))
        let removed = try local.removePartialWrites()
        if removed > 0 {
            logger.notice("removed partial media writes left by a crash", metadata: ["count": "\(removed)"])
        }
        let blobs: any BlobStore
        var objectStoreClient: HTTPClient?
        if let endpoint = configuration.s3Endpoint, let accessKey = configuration.s3AccessKey, let secretKey = configuration.s3SecretKey {
            let client = HTTPClient(
                eventLoopGroupProvider: .singleton,
                configuration: .init(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(5))))
            objectStoreClient = client
            let s3 = try S3BlobStore(
                settings: .init(
                    endpoint: endpoint, bucket: configuration.s3Bucket, prefix: configuration.s3Prefix, region: configuration.s3Region,
                    accessKey: accessKey, secretKey: secretKey,
                    timeout: .seconds(configuration.s3TimeoutSeconds)),
                client: client, scratch: URL(fileURLWithPath: configuration.mediaDirectory).appendingPathComponent(".partial"), logger: logger)
            do {
                try await s3.ensureBucket()
            } catch {
                try? await client.shutdown()
                await database.close()
                throw error
            }
            logger.info("media in the object store", metadata: ["endpoint": "\(endpoint)", "bucket": "\(configuration.s3Bucket)"])
            blobs = s3
        } else {
            blobs = local
        }
        // One node: events stay in the process. Several: they cross nodes through PostgreSQL.
        let clusterBus: ClusterEventBus? = configuration.cluster
            ? ClusterEventBus(
                transport: try PostgresBusTransport(url: configuration.resolvedDatabaseURL, database: database, logger: logger), logger: logger)
            : nil
        let bus: any EventBus = clusterBus ?? given ?? LocalEventBus()
        let hub = RealtimeHub(
            bus: bus, queueLimit: configuration.realtimeQueueLimit, writeTimeout: .seconds(configuration.realtimeWriteTimeoutSeconds),
            metrics: metrics, logger: logger)
        let clusterPresence = clusterBus.map { ClusterPresence(hub: hub, bus: $0, logger: logger) }
        let presence: any PresenceDirectory = clusterPresence ?? hub
        // Events missed by this node (a lost bus connection): its clients resume from the log.
        clusterBus?.onGap { hub.resumeAll(reason: "this server may have missed events: reconnect and resume") }
        if let clusterBus { logger.info("joined the cluster", metadata: ["node": "\(clusterBus.node)"]) }
        let drain = Drain()
        let jobSignal = JobSignal()
        let jobs = JobQueue(store: store, clock: clock, signal: jobSignal, maxAttempts: configuration.jobMaxAttempts)
        let conversations = ConversationService(
            store: store, bus: bus, metrics: metrics, limits: limits, clock: clock, jobs: jobs, logger: logger)
        let ffmpeg = ProcessRunner.locate(configuration.ffmpeg).map(ProcessRunner.init(executable:))
        if ffmpeg == nil {
            logger.warning("ffmpeg was not found: voice messages are refused until it is installed", metadata: ["ffmpeg": "\(configuration.ffmpeg)"])
        }
        let httpClient = ProviderHTTP.makeClient(readTimeoutSeconds: configuration.providerTimeoutSeconds, caFile: configuration.providerCAFile)
        let providerHTTP = ProviderHTTP(client: httpClient, timeout: .seconds(configuration.providerTimeoutSeconds))
        var transcriber = givenTranscriber
        if transcriber == nil {
            transcriber = await Self.transcriber(
                configuration, ffmpeg: ffmpeg, http: ProviderHTTP(client: httpClient, timeout: .seconds(configuration.transcriberTimeoutSeconds)),
                logger: logger)
        }
        var notes = VoiceNotes(store: store, blobs: blobs, log: conversations.conversationLog, clock: clock, logger: logger)
        if let transcriber, ffmpeg != nil { notes.transcribes = { language in transcriber.supports(language: language) } }
        let processor = VoiceProcessor(
            store: store.access { $0 }, blobs: blobs,
            transcoder: ffmpeg.map { VoiceTranscoder(ffmpeg: $0, timeout: .seconds(configuration.ffmpegTimeoutSeconds)) },
            notes: notes,
            concurrency: configuration.voiceWorkers, logger: logger)
        let endpoint = configuration.clamdEndpoint
        if let endpoint {
            logger.info("malware scanning with clamd", metadata: ["clamd": "\(endpoint)"])
        } else {
            logger.warning("no malware scanner: voice notes are delivered marked unscanned (set PARLEY_CLAMD)")
        }
        let scanning = MalwareScanning(
            scanner: endpoint.map { ClamdScanner(endpoint: $0, timeout: .seconds(configuration.clamdTimeoutSeconds)) },
            retry: .init(firstDelaySeconds: configuration.scanRetrySeconds, maxAttempts: configuration.scanMaxAttempts),
            store: store.access { $0 }, blobs: blobs, notes: notes, metrics: metrics, clock: clock, logger: logger)
        let voice = VoiceService(
            store: store.access { $0 }, blobs: blobs, conversations: conversations, scanning: scanning, notes: notes,
            analyzer: ffmpeg.map { AudioAnalyzer(ffmpeg: $0, timeout: .seconds(min(30, configuration.ffmpegTimeoutSeconds))) },
            maxUploadBytes: configuration.maxVoiceBytes,
            pace: .init(
                idle: .seconds(configuration.uploadIdleTimeoutSeconds), minBytesPerSecond: configuration.uploadMinBytesPerSecond,
                deadline: .seconds(configuration.uploadDeadlineSeconds)),
            analyses: WorkSlots(limit: configuration.voiceAnalyses, queueLimit: configuration.voiceQueue),
            uploads: UploadGate(perConsumer: configuration.uploadsPerConsumer, perAddress: configuration.uploadsPerAddress),
            limits: limits, metrics: metrics, drain: drain, logger: logger)
        let brandSettings = BrandSettingsService(store: store, clock: clock, transcriberAvailable: notes.transcribes != nil)
        let attachments = AttachmentService(
                store: store.access { $0 }, blobs: blobs, conversations: conversations, scanning: scanning,
                thumbnailer: ffmpeg.flatMap { ffmpeg in
                    ProcessRunner.locate("ffprobe").map { ffprobe in
                        // Image decoders run under a memory limit (a bomb that passes the header check still cannot take the machine).
                        ImageThumbnailer(
                            ffmpeg: ProcessRunner(executable: ffmpeg.executable, memoryLimit: configuration.imageMemoryBytes),
                            ffprobe: ProcessRunner(executable: ffprobe, memoryLimit: configuration.imageMemoryBytes),
                            heifConvert: ProcessRunner.locate("heif-convert").map { ProcessRunner(executable: $0, memoryLimit: configuration.imageMemoryBytes) },
                            timeout: .seconds(min(30, configuration.ffmpegTimeoutSeconds)))
                    }
                },
                brandSettings: brandSettings,
                maxUploadBytes: configuration.maxAttachmentBytes, receiver: UploadReceiver(pace: voice.pace, metrics: metrics, drain: drain),
                thumbnails: WorkSlots(limit: configuration.voiceAnalyses, queueLimit: configuration.voiceQueue), uploads: voice.uploads,
                limits: limits, clock: clock, logger: logger)
        let inbox = ChannelInbox(
            store: store, conversations: conversations, voice: voice, attachments: attachments, blobs: blobs, http: providerHTTP, clock: clock,
            logger: logger)
        let connector = ChannelConnector(store: store, secrets: secrets, clock: clock)
        let whatsapp = WhatsAppChannel(
            store: store, secrets: secrets, connector: connector, conversations: conversations, inbox: inbox, blobs: blobs, jobs: jobs,
            api: WhatsAppAPI(http: providerHTTP, baseURL: configuration.whatsappAPIURL),
            mediaHosts: MediaHostAllowList(configuration.whatsappMediaHosts), metrics: metrics, clock: clock, logger: logger)
        let messenger = MessengerChannel(
            store: store, connector: connector, conversations: conversations, inbox: inbox, blobs: blobs, jobs: jobs, http: providerHTTP,
            baseURL: configuration.messengerAPIURL, mediaHosts: MediaHostAllowList(configuration.messengerMediaHosts), metrics: metrics,
            clock: clock, logger: logger)
        let links = SharedLinks(secrets: secrets, hours: configuration.sharedLinkHours, clock: clock)
        let sms = SMSChannel(
            store: store, connector: connector, conversations: conversations, inbox: inbox, jobs: jobs, http: providerHTTP, links: links,
            baseURL: configuration.twilioAPIURL, mediaHosts: MediaHostAllowList(configuration.twilioMediaHosts), publicURL: configuration.publicURL,
            metrics: metrics, clock: clock, logger: logger)
        let apple = AppleChannel(
            store: store, connector: connector, conversations: conversations, inbox: inbox, blobs: blobs, jobs: jobs, http: providerHTTP,
            baseURL: configuration.appleAPIURL, mediaHosts: MediaHostAllowList(configuration.appleMediaHosts), metrics: metrics, clock: clock,
            tokenMaxAge: TimeInterval(configuration.appleTokenMaxAgeSeconds), logger: logger)
        let connectors: [ParleyAPI.Channel: any OutboundConnector] = [
            .whatsapp: WhatsAppOutbound(whatsapp: whatsapp), .messenger: MessengerOutbound(messenger: messenger), .sms: SMSOutbound(sms: sms),
            .apple: AppleOutbound(apple: apple),
        ]
        let vapid = try VAPIDKey.load(configuration)
        let webPushHosts = MediaHostAllowList(configuration.webPushHosts)
        let push = PushService(
            store: store.access { $0 }, secrets: secrets, presence: presence, jobs: jobs, limits: limits, webPushHosts: webPushHosts, vapidPublicKey: vapid.publicKeyBase64URL, clock: clock,
            logger: logger)
        push.watch(bus)
        let routing = RoutingService(store: store, presence: presence, bus: bus, jobs: jobs, clock: clock, logger: logger)
        routing.watch(bus)
        let lifecycle = LifecycleService(store: store, conversations: conversations, bus: bus, jobs: jobs, clock: clock, logger: logger)
        let records = RecordsService(
            store: store, blobs: blobs, hub: hub, clock: clock, interval: TimeInterval(configuration.retentionIntervalHours) * 3600, logger: logger)
        let reports = ReportsService(store: store.access { $0 }, presence: presence, hub: hub, bus: bus, clock: clock, logger: logger)
        reports.watch(bus)
        let handlers: [any JobHandler] = lifecycle.handlers + [
            processor.handler, scanning.handler,
            VoiceTranscription(
                store: store.access { $0 }, blobs: blobs,
                audio: TranscriptionAudio(
                    ffmpeg: (ffmpeg ?? ProcessRunner(executable: configuration.ffmpeg)).niced(configuration.transcriberNiceness),
                    timeout: .seconds(min(60, configuration.ffmpegTimeoutSeconds))),
                transcriber: transcriber ?? NoTranscriber(), notes: notes,
                slots: WorkSlots(limit: configuration.transcriberWorkers, queueLimit: 100_000), metrics: metrics, logger: logger
            ).handler,
            PayloadJobHandler(kind: RecordsService.retentionJob, run: records.runRetention),
            PushSender(
                store: store, secrets: secrets, http: providerHTTP, apnsURL: configuration.apnsAPIURL, tokens: APNsTokens(),
                fcm: FCMSender(http: providerHTTP, apiURL: configuration.fcmAPIURL, tokenURL: configuration.fcmTokenURL, tokens: FCMTokens()),
                webPush: WebPushSender(http: providerHTTP, vapid: vapid, hosts: webPushHosts, subject: configuration.vapidSubject), clock: clock,
                logger: logger),
            ChannelSender(store: store, conversations: conversations, connectors: connectors, logger: logger),
            // Webhooks are processed after they were acknowledged; media is fetched on its own. A
            // media job given up on still tells the agent that the customer sent something.
            PayloadJobHandler(kind: WhatsAppChannel.webhookJob, run: whatsapp.process),
            PayloadJobHandler(kind: WhatsAppChannel.mediaJob, run: whatsapp.fetchMedia, lost: whatsapp.mediaLost),
            PayloadJobHandler(kind: MessengerChannel.webhookJob, run: messenger.process),
            PayloadJobHandler(kind: MessengerChannel.mediaJob, run: messenger.fetchMedia, lost: messenger.mediaLost),
            PayloadJobHandler(kind: SMSChannel.webhookJob, run: sms.process),
            PayloadJobHandler(kind: SMSChannel.mediaJob, run: sms.fetchMedia, lost: sms.mediaLost),
            PayloadJobHandler(kind: AppleChannel.webhookJob, run: apple.process),
            PayloadJobHandler(kind: AppleChannel.mediaJob, run: apple.fetchMedia, lost: apple.mediaLost),
            PayloadJobHandler(kind: RoutingService.requeueJob, run: routing.requeue),
        ]
        // A lease outlasts the slowest job: a provider's request (with its retries) or a conversion
        // that waited for a slot. A job whose node died is taken over once its lease runs out.
        let lease = TimeInterval(
            max(60, configuration.providerTimeoutSeconds * 4, configuration.ffmpegTimeoutSeconds * 2 + 60, configuration.transcriberTimeoutSeconds * 2 + 60))
        let jobRunner = JobRunner(
            store: store, clock: clock, signal: jobSignal, handlers: Dictionary(uniqueKeysWithValues: handlers.map { ($0.kind, $0) }),
            concurrency: configuration.jobConcurrency, lease: lease, pollInterval: .milliseconds(500), metrics: metrics, logger: logger)
        let adopted = try await VoiceJobs.adopt(store: store, clock: clock)
        if adopted > 0 { logger.notice("voice notes left waiting got their jobs", metadata: ["count": "\(adopted)"]) }
        return ParleyServices(
            configuration: configuration, store: store, bus: bus, hub: hub, presence: presence,
            cluster: [clusterBus as (any Service)?, clusterPresence, sharedBuckets].compactMap { $0 }, metrics: metrics,
            identity: IdentityService(store: store, configuration: configuration, metrics: metrics, clock: clock),
            conversations: conversations, voice: voice, brandSettings: brandSettings, voiceProcessor: processor, blobs: blobs,
            calls: CallService(
                store: store, hub: hub, bus: bus, conversations: conversations, configuration: configuration, clock: clock,
                relay: clusterBus.flatMap { bus in clusterPresence.map { BusCallRelay(bus: bus, presence: $0) } }, logger: logger),
            cobrowse: CobrowseService(
                store: store, hub: hub, bus: bus, conversations: conversations, configuration: configuration, clock: clock,
                cluster: clusterBus.flatMap { bus in clusterPresence.map { presence in (node: bus.node, liveNodes: { presence.liveNodes() }) } },
                logger: logger),
            workspace: WorkspaceService(store: store, presence: presence, bus: bus, clock: clock, logger: logger),
            whatsapp: whatsapp, messenger: messenger, sms: sms, apple: apple, push: push,
            activity: ActivityService(store: store.access { $0 }, conversations: conversations, limits: limits, clock: clock, logger: logger),
            routing: routing, lifecycle: lifecycle,
            transcripts: TranscriptService(
                store: store.access { $0 }, clock: clock, publicURL: configuration.publicURL, running: RunningExports(), maxExports: configuration.transcriptExports,
                logger: logger),
            records: records, reports: reports,
            links: links, jobRunner: jobRunner, httpClient: httpClient, objectStoreClient: objectStoreClient,
            attachments: attachments,
            scanning: scanning, limits: limits, connections: ConnectionCounter(),
            searchIndexer: SearchIndexer(store: store.access { $0 }, interval: .milliseconds(250), logger: logger),
            janitor: MediaJanitor(
                store: store.access { $0 }, blobs: blobs, minimumAge: TimeInterval(configuration.orphanMediaAgeSeconds), interval: .seconds(15 * 60),
                metrics: metrics, logger: logger),
            revocations: SessionRevocations(
                store: store.access { $0 }, hub: hub, clock: clock, interval: SessionRevocations.defaultInterval, logger: logger),
            drain: drain,
            clock: clock)
    }

    /// The transcriber the settings ask for, if it can run here: `embedded` checks that its Python
    /// has pocketsphinx (a server without it has none, and says so); `openai` trusts the endpoint
    /// until a job finds otherwise.
    static func transcriber(
        _ configuration: ParleyConfiguration, ffmpeg: ProcessRunner?, http: ProviderHTTP, logger: Logger
    ) async -> (any Transcriber)? {
        switch configuration.transcriber {
        case "openai":
            guard let url = configuration.transcriptionURL else { return nil }
            logger.info("voice notes are transcribed by an OpenAI-compatible endpoint", metadata: ["url": "\(url)", "model": "\(configuration.transcriptionModel)"])
            return OpenAITranscriber(http: http, baseURL: url, model: configuration.transcriptionModel, apiKey: configuration.transcriptionAPIKey)
        case "embedded":
            guard ffmpeg != nil, let python = ProcessRunner.locate(configuration.transcriberPython) else {
                logger.notice("no transcriber: \(configuration.transcriberPython) or ffmpeg was not found (PARLEY_TRANSCRIBER_PYTHON)")
                return nil
            }
            let embedded = EmbeddedTranscriber(
                python: ProcessRunner(
                    executable: python, memoryLimit: configuration.transcriberMemoryMB * 1024 * 1024, niceness: configuration.transcriberNiceness),
                timeout: .seconds(configuration.transcriberTimeoutSeconds))
            if let problem = await embedded.check() {
                logger.notice("no transcriber: \(problem)")
                return nil
            }
            logger.info(
                "voice notes can be transcribed on this server (PocketSphinx)", metadata: ["python": "\(python)", "niceness": "\(embedded.niceness)"])
            return embedded
        default:
            return nil
        }
    }

    public func close() async {
        drain.stop()
        try? await httpClient.shutdown()
        try? await objectStoreClient?.shutdown()
        await store.close()
    }

    /// Seals every sealed value (`SealedColumns.all`: channel secrets, push credentials) with the
    /// current key, after a rotation (docs/channels.md); returns how many it sealed again.
    public func resealSecrets() async throws -> Int {
        try await SecretBox.reseal(store: store, secrets: whatsapp.secrets)
    }
}

/// The HTTP router with every API route. Exposed so that tests can compare it with the OpenAPI document.
public func buildRouter(_ services: ParleyServices) -> Router<ParleyRequestContext> {
    let router = Router(context: ParleyRequestContext.self)
    router.add(middleware: RequestIDMiddleware())
    if services.configuration.tracing {
        // A span per request, named by its route (PARLEY_OTLP_ENDPOINT; none at all otherwise).
        router.add(middleware: TracingMiddleware())
    }
    router.add(middleware: DrainMiddleware(drain: services.drain))
    router.add(middleware: SecurityHeadersMiddleware())
    // Outside the error middleware: it sees the answer an error became.
    router.add(middleware: RequestMetricsMiddleware(metrics: services.metrics))
    router.add(middleware: ErrorMiddleware())
    // Static files first: serving the pages and their scripts looks up no session.
    router.add(middleware: FileMiddleware(services.configuration.publicDirectory ?? "./Public", searchForIndexHtml: true))
    let routes = RouteGroups(
        router, authentication: AuthMiddleware(identity: services.identity, allowedOrigins: services.configuration.allowedOrigins))
    AuthController(identity: services.identity, hub: services.hub, configuration: services.configuration, limits: services.limits)
        .addRoutes(to: routes)
    ConversationController(
        conversations: services.conversations, identity: services.identity, configuration: services.configuration)
        .addRoutes(to: routes)
    AdminController(identity: services.identity, hub: services.hub, configuration: services.configuration).addRoutes(to: routes)
    let clusterBus = services.bus as? ClusterEventBus
    SystemController(
        store: services.store, blobs: services.blobs, drain: services.drain, busConnected: { clusterBus?.isConnected ?? true },
        metrics: services.metrics, configuration: services.configuration
    ).addRoutes(to: routes)
    VoiceController(
        voice: services.voice, identity: services.identity, blobs: services.blobs, configuration: services.configuration
    ).addRoutes(to: routes)
    CallController(calls: services.calls, configuration: services.configuration).addRoutes(to: routes)
    AttachmentController(attachments: services.attachments, blobs: services.blobs, configuration: services.configuration).addRoutes(to: routes)
    BrandSettingsController(settings: services.brandSettings, attachments: services.attachments).addRoutes(to: routes)
    ChannelController(
        whatsapp: services.whatsapp, messenger: services.messenger, sms: services.sms, apple: services.apple, conversations: services.conversations, store: services.store,
        configuration: services.configuration
    ).addRoutes(to: routes)
    SharedLinkController(links: services.links, store: services.store, blobs: services.blobs).addRoutes(to: routes)
    PushController(push: services.push, configuration: services.configuration).addRoutes(to: routes)
    ActivityController(activity: services.activity, configuration: services.configuration).addRoutes(to: routes)
    RoutingController(routing: services.routing, configuration: services.configuration).addRoutes(to: routes)
    LifecycleController(lifecycle: services.lifecycle, configuration: services.configuration).addRoutes(to: routes)
    TranscriptController(transcripts: services.transcripts).addRoutes(to: routes)
    RecordsController(records: services.records, configuration: services.configuration).addRoutes(to: routes)
    ReportsController(reports: services.reports).addRoutes(to: routes)
    WorkspaceController(
        workspace: services.workspace, brandSettings: services.brandSettings, identity: services.identity, limits: services.limits,
        configuration: services.configuration
    ).addRoutes(to: routes)
    return router
}

/// The real-time endpoint: the router that decides its upgrades (it has that one route only).
func realtimeController(_ services: ParleyServices) -> RealtimeController {
    RealtimeController(
        conversations: services.conversations, calls: services.calls, cobrowse: services.cobrowse, hub: services.hub,
        configuration: services.configuration,
        limits: services.limits, metrics: services.metrics)
}

public func buildWebSocketRouter(_ services: ParleyServices) -> Router<ParleyRequestContext> {
    buildWebSocketRouter(services, realtime: realtimeController(services))
}

func buildWebSocketRouter(_ services: ParleyServices, realtime: RealtimeController) -> Router<ParleyRequestContext> {
    let router = Router(context: ParleyRequestContext.self)
    router.add(middleware: ErrorMiddleware())
    router.add(middleware: AuthMiddleware(identity: services.identity, allowedOrigins: services.configuration.allowedOrigins))
    realtime.addRoutes(to: router)
    return router
}

/// The whole server: HTTP, the real-time WebSocket (with permessage-deflate) and the real-time hub.
public func buildApplication(
    _ services: ParleyServices, logger: Logger, onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let configuration = services.configuration
    // One controller decides the upgrades and opens the connections.
    let realtime = realtimeController(services)
    let webSocketResponder = buildWebSocketRouter(services, realtime: realtime).buildResponder()
    let connectionGuard = ConnectionGuardSettings(
        headerTimeout: .seconds(Int64(configuration.headerTimeoutSeconds)), maxHeadBytes: configuration.maxHeaderBytes,
        // Behind a proxy every connection comes from the proxy: the proxy limits clients.
        maxPerAddress: configuration.trustProxy ? 0 : configuration.maxConnectionsPerAddress,
        origins: OriginPolicy(allowedOrigins: configuration.allowedOrigins), floods: services.limits.floods)
    let socketSettings = RealtimeSocket.Settings(
        maxMessageBytes: configuration.maxRealtimeFrameBytes, framesPerSecond: configuration.realtimeFramesPerSecond)
    // Small windows (1 KB) and memory level 2: each compressed connection keeps about 10 KB of zlib
    // state instead of ~90 KB at zlib's defaults, and Parley's frames (a few hundred bytes, repeating
    // keys) compress nearly as well. Frames from 64 bytes are compressed: with the shared window even
    // small ones shrink.
    let deflate = PerMessageDeflate.Settings(clientMaxWindow: 10, serverMaxWindow: 10, memoryLevel: 2, minimumSize: 64)
    let counter = services.connections
    let metrics = services.metrics
    let server = HTTPServerBuilder { responder in
        GuardedChildChannel(
            inner: RealtimeChannel(
                responder: responder, upgradeResponder: webSocketResponder,
                http1: .init(idleTimeout: TimeAmount.seconds(Int64(configuration.idleTimeoutSeconds))),
                maxFrameSize: configuration.maxRealtimeFrameBytes, deflate: deflate,
                makeSocket: { upgrade, agreement, logger in
                    RealtimeSocket(
                        settings: socketSettings, deflate: agreement.map { PerMessageDeflate(agreement: $0, settings: deflate) },
                        metrics: metrics
                    ) { writer, eventLoop, queueLimit in
                        realtime.open(upgrade, writer: writer, eventLoop: eventLoop, queueLimit: queueLimit, logger: logger)
                    }
                }),
            settings: connectionGuard, counter: counter, metrics: metrics)
    }
    let app = Application(
        router: buildRouter(services),
        server: server,
        // A deep accept queue: a burst of connections is accepted (and then timed) instead of
        // waiting in the kernel, where no timeout of ours applies.
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "Parley", backlog: 4096),
        onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? 0) },
        logger: logger)
    return app
}

/// Runs the application, the real-time hub and the call service together. Graceful shutdown goes in
/// reverse order: live calls end first (both sides are told, records are stored), then every client
/// is told to reconnect and resume (close code 4000), then the HTTP server stops.
///
/// `drainDeadline`: how long open requests may take once shutdown begins (`Drain`); what is still
/// running 5 s after it is cancelled.
public func makeServiceGroup(
    _ app: some ApplicationProtocol, _ services: ParleyServices, gracefulShutdownSignals: [UnixSignal] = [.sigterm, .sigint],
    drainDeadline: Duration = .seconds(25), also: [any Service] = [], logger: Logger
) -> ServiceGroup {
    // The deadline's service is last: shutdown goes in reverse order, so it hears first.
    let deadline = DrainDeadline(drain: services.drain, deadline: drainDeadline, logger: logger)
    var configuration = ServiceGroupConfiguration(
        // `also` first: stopped last (the trace exporter sends the spans of the shutdown itself).
        services: also + services.cluster + [
            services.janitor, services.searchIndexer, services.revocations, services.jobRunner, app, services.hub, services.calls, services.cobrowse, deadline,
        ],
        gracefulShutdownSignals: gracefulShutdownSignals, logger: logger)
    configuration.maximumGracefulShutdownDuration = drainDeadline + .seconds(5)
    return ServiceGroup(configuration: configuration)
}
