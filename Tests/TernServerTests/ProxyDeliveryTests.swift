import Foundation
import TernAPNs
import TernSimulator
import TernTestSupport
import Testing

/// `apns.proxy`: a node whose only way out is an egress proxy reaches APNs through its tunnels; the built-in
/// simulator, in the node's own process, is reached directly.
struct ProxyDeliveryTests {
    @Test func pushesToAnEndpointGoThroughTheProxyAndTheBuiltInSimulatorDoesNot() async throws {
        let proxy = try await ConnectProxy(credentials: "tern:s3cret")
        let key = APNsSigningKey.generate(keyID: "PROXY00001", teamID: "TEAM123456")
        var remote = try APNsSimulator.Configuration.endpoint(trusting: key)
        remote.controlPort = nil
        try await APNsSimulator.withRunning(remote) { apns in
            try await RouterHarness.withServer(configure: { $0.apns.proxy = "http://tern:s3cret@127.0.0.1:\(proxy.port)" }) { server in
                let (_, master) = try await server.createCustomApp(
                    "remote", port: apns.port, caPEM: apns.certificateAuthority.certificatePEM, key: key, devices: 20)
                let pushed = try await master.post("/v1/apps/remote/pushes?wait=30", Fixture.push(audience: #"{"all": true}"#, title: "via proxy"))
                #expect(pushed.status == 201, "\(pushed.text)")
                #expect(try pushed.json()[path: "counts.accepted"]?.int == 20, "\(pushed.text)")
                #expect(apns.state.stats().accepted == 20)
                #expect(!proxy.tunnels.isEmpty)
                #expect(Set(proxy.tunnels) == ["127.0.0.1:\(apns.port)"], "only the custom endpoint's connections are tunnelled")

                // The demo app delivers to the built-in simulator: directly, not through the proxy. (The remote app's
                // client may still open more connections meanwhile, so the tunnels' targets are what is checked.)
                _ = try await server.register(Fixture.device(100), token: Fixture.token(100))
                let local = try await server.master.post(
                    "/v1/apps/demo/pushes?wait=30", Fixture.push(audience: #"{"devices": ["\#(Fixture.device(100))"]}"#, title: "local"))
                #expect(try local.json()[path: "counts.accepted"]?.int == 1, "\(local.text)")
                #expect(Set(proxy.tunnels) == ["127.0.0.1:\(apns.port)"])
                #expect(proxy.requests.allSatisfy { $0 == "CONNECT 127.0.0.1:\(apns.port) HTTP/1.1" })
            }
        }
        await proxy.close()
    }

    @Test func aProxyThatRefusesTheTunnelFailsThePushAsUnreachable() async throws {
        let proxy = try await ConnectProxy(credentials: "tern:right")
        try await RouterHarness.withServer(configure: {
            $0.apns.proxy = "http://tern:wrong-hunter2@127.0.0.1:\(proxy.port)"
            $0.apns.sendTimeout = .seconds(2)
        }) { server in
            let (_, master) = try await server.createCustomApp(
                "remote", port: 9, key: APNsSigningKey.generate(keyID: "PROXY00002", teamID: "TEAM123456"), devices: 1)
            let pushed = try await master.post("/v1/apps/remote/pushes?wait=30", Fixture.push(audience: #"{"all": true}"#, title: "x"))
            // Refused by the proxy (407), the endpoint counts as unreachable: after the send time, a classified failure,
            // not a hang. (The client's tests read the error itself, which names the proxy and not its password.)
            #expect(try pushed.json()[path: "counts.failedByReason.connectionFailed"]?.int == 1, "\(pushed.text)")
            // The push's detail says the proxy refused, without its password.
            let detail = try #require(try pushed.json()[path: "failureDetails.connectionFailed"]?.string, "\(pushed.text)")
            #expect(detail.contains("407"), "\(detail)")
            #expect(!pushed.text.contains("hunter2"))
            #expect(proxy.tunnels.isEmpty)
            #expect(proxy.requests.allSatisfy { $0 == "CONNECT 127.0.0.1:9 HTTP/1.1" } && !proxy.requests.isEmpty)
        }
        await proxy.close()
    }
}
