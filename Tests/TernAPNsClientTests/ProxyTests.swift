import Foundation
import TernAPNs
import TernAPNsClient
import TernSimulator
import TernTestSupport
import Testing

extension ClientFaultTests {
    /// The client behind an egress proxy: its connections go through a CONNECT tunnel to a real simulator over real
    /// TLS, and a proxy that will not open one is named in the error, never the proxy's password.
    @Suite struct Proxy {
        @Test func notificationsGoThroughTheProxysTunnelWithTLSEndToEnd() async throws {
            let proxy = try await ConnectProxy(credentials: "tern:s3cret word")
            try await Harness.withSimulator { simulator in
                var configuration = Harness.clientConfiguration(for: simulator)
                configuration.connections = 1
                configuration.proxy = try HTTPProxy(url: "http://tern:s3cret%20word@127.0.0.1:\(proxy.port)")
                try await APNsClient.withClient(configuration) { client in
                    for index in 0..<3 {
                        let delivery = try await client.send(Harness.notification(index))
                        #expect(delivery.response.isSuccess)
                    }
                }
                #expect(Harness.arrivals(simulator).count == 3)
                // One connection, through one tunnel, to the endpoint by the name the client was given.
                #expect(proxy.tunnels == ["127.0.0.1:\(simulator.port)"])
                #expect(proxy.requests == ["CONNECT 127.0.0.1:\(simulator.port) HTTP/1.1"])
            }
            await proxy.close()
        }

        @Test func wrongProxyCredentialsFailTheSendNamingTheProxyButNotThePassword() async throws {
            let proxy = try await ConnectProxy(credentials: "tern:s3cret")
            try await Harness.withSimulator { simulator in
                var configuration = Harness.clientConfiguration(for: simulator)
                configuration.sendTimeout = .seconds(1)
                configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port, username: "tern", password: "hunter2")
                try await APNsClient.withClient(configuration) { client in
                    let error = await #expect(throws: APNsClientError.self) { try await client.send(Harness.notification(0)) }
                    let message = error?.message ?? ""
                    #expect(message.contains("http://127.0.0.1:\(proxy.port)"), "\(message)")
                    #expect(message.contains("407"), "\(message)")
                    #expect(!message.contains("hunter2"))
                }
                #expect(Harness.arrivals(simulator).isEmpty)
                #expect(proxy.tunnels.isEmpty)
            }
            await proxy.close()
        }

        @Test func aProxyThatRefusesTheTunnelIsNamedWithItsAnswer() async throws {
            let proxy = try await ConnectProxy()
            proxy.refuseWith("403 Forbidden")
            try await Harness.withSimulator { simulator in
                var configuration = Harness.clientConfiguration(for: simulator)
                configuration.sendTimeout = .seconds(1)
                configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port)
                try await APNsClient.withClient(configuration) { client in
                    let error = await #expect(throws: APNsClientError.self) { try await client.send(Harness.notification(0)) }
                    #expect(error?.message.contains("refused the tunnel (it answered 403 Forbidden)") == true, "\(error?.message ?? "")")
                }
            }
            await proxy.close()
        }

        @Test func aProxyThatIsNotThereIsNamedInTheError() async throws {
            try await withClosedPort { port in
                try await Harness.withSimulator { simulator in
                    var configuration = Harness.clientConfiguration(for: simulator)
                    configuration.sendTimeout = .seconds(1)
                    configuration.proxy = HTTPProxy(host: "127.0.0.1", port: port, username: "ops", password: "hunter2")
                    try await APNsClient.withClient(configuration) { client in
                        let error = await #expect(throws: APNsClientError.self) { try await client.send(Harness.notification(0)) }
                        let message = error?.message ?? ""
                        #expect(message.contains("cannot connect to the proxy http://127.0.0.1:\(port)"), "\(message)")
                        #expect(!message.contains("hunter2"))
                    }
                }
            }
        }

        @Test func theLegacyGatewayAndFeedbackServiceGoThroughTheProxyToo() async throws {
            let proxy = try await ConnectProxy()
            try await LegacyGateway.withLegacySimulator { simulator, gateway in
                var configuration = gateway
                configuration.proxy = HTTPProxy(host: "127.0.0.1", port: proxy.port)
                let client = try LegacyGatewayClient(configuration: configuration)
                let outcomes = await client.send(LegacyGateway.notifications(5))
                await client.shutdown()
                #expect(outcomes == Array(repeating: .accepted, count: 5))
                #expect(simulator.state.stats().legacyAccepted == 5)

                var feedback = configuration
                feedback.endpoint.port = try #require(simulator.feedbackPort)
                simulator.state.unregister(Harness.token(1, series: 9), at: Date(timeIntervalSince1970: 1_800_000_000))
                let tuples = try await LegacyFeedbackClient.fetch(feedback)
                #expect(tuples == [FeedbackTuple(timestamp: 1_800_000_000, token: Harness.token(1, series: 9).bytes)])
                #expect(proxy.tunnels == ["127.0.0.1:\(try #require(simulator.legacyGatewayPort))", "127.0.0.1:\(try #require(simulator.feedbackPort))"])
            }
            await proxy.close()
        }

        @Test(arguments: [
            ("http://proxy.example:3128", "http://proxy.example:3128", nil, nil),
            ("http://user:p%40ss@10.0.0.1:8080", "http://10.0.0.1:8080", "user", "p@ss"),
            ("HTTP://[::1]:3128/", "http://[::1]:3128", nil, nil),
        ] as [(String, String, String?, String?)])
        func proxyURLsAreRead(url: String, shown: String, username: String?, password: String?) throws {
            let proxy = try HTTPProxy(url: url)
            #expect(proxy.description == shown)
            #expect(proxy.username == username)
            #expect(proxy.password == password)
        }

        @Test(arguments: [
            ("https://proxy.example:3128", "scheme"),
            ("http://proxy.example", "port"),
            ("http://proxy.example:0", "port"),
            ("http://:3128", "host"),
            ("http://proxy.example:3128/path", "path"),
            ("http://:secret@proxy.example:3128", "user"),
            ("proxy.example:3128", "scheme"),
        ])
        func badProxyURLsAreRefusedWithoutTheirPassword(url: String, problem: String) {
            let error = #expect(throws: APNsClientError.self) { try HTTPProxy(url: url) }
            #expect(error?.code == .invalidConfiguration)
            #expect(error?.message.contains(problem) == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("secret") == false)
        }
    }
}
