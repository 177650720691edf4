import Foundation
import NIOCore
import TernTestSupport
import Testing

@testable import TernServer

/// Where webhooks may point, and how background loops wait after errors: as values, then through the API.
struct HardeningTests {
    @Test(arguments: [
        ("169.254.169.254", false, "link-local"),
        ("169.254.169.254", true, "link-local"),
        ("::ffff:169.254.169.254", true, "link-local"),
        ("fe80::1", true, "link-local"),
        ("fd00:ec2::254", true, "metadata"),
        ("0.0.0.0", true, "unicast"),
        ("127.0.0.1", false, "private"),
        ("10.1.2.3", false, "private"),
        ("172.16.0.1", false, "private"),
        ("192.168.1.1", false, "private"),
        ("100.64.0.1", false, "private"),
        ("::1", false, "private"),
        ("fd12:3456::1", false, "private"),
        // IPv6 forms that carry an IPv4 address, and reach it: checked as that address.
        ("::127.0.0.1", false, "private"),
        ("::169.254.169.254", true, "link-local"),
        ("64:ff9b::a9fe:a9fe", true, "link-local"),
        ("64:ff9b::7f00:1", false, "private"),
        ("2002:a9fe:a9fe::1", true, "link-local"),
        ("2002:0a00:0001::1", false, "private"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", false, "private"),
        ("64:ff9b:1::a00:1", false, "private"),
    ])
    func aWebhookAddressIsRefusedNamingWhy(address: String, allowPrivate: Bool, reason: String) throws {
        let policy = WebhookAddressPolicy(allowPrivateNetworks: allowPrivate)
        let refusal = policy.refusal(try SocketAddress(ipAddress: address, port: 443))
        #expect(refusal?.contains(reason) == true, "\(address): \(refusal ?? "allowed")")
    }

    @Test func publicAddressesAlwaysAndPrivateOnesWhenAllowedMayBeReached() throws {
        for address in ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "172.32.0.1", "11.0.0.1", "64:ff9b::5db8:d822", "2002:5db8:d822::1"] {
            #expect(WebhookAddressPolicy(allowPrivateNetworks: false).refusal(try SocketAddress(ipAddress: address, port: 443)) == nil, "\(address)")
        }
        for address in ["127.0.0.1", "10.0.0.1", "::1", "192.168.0.10"] {
            #expect(WebhookAddressPolicy(allowPrivateNetworks: true).refusal(try SocketAddress(ipAddress: address, port: 443)) == nil, "\(address)")
        }
        #expect(WebhookAddressPolicy(allowPrivateNetworks: false).refusal(host: "LOCALHOST.") != nil)
        #expect(WebhookAddressPolicy(allowPrivateNetworks: false).refusal(host: "[::1]") != nil)
        #expect(WebhookAddressPolicy(allowPrivateNetworks: false).refusal(host: "hooks.example.com") == nil, "names are checked when resolved")
    }

    /// A name that does not resolve is refused, unless the post goes through an egress proxy, which resolves names
    /// itself; through one, a name or an address that is forbidden is refused as ever.
    @Test func throughAProxyOnlyANameThatDoesNotResolveIsLeftToTheProxy() async {
        let policy = WebhookAddressPolicy(allowPrivateNetworks: false)
        // `.invalid` never resolves (RFC 6761).
        #expect(await policy.refusal(resolving: "hooks.invalid", port: 443)?.contains("does not resolve") == true)
        #expect(await policy.refusal(resolving: "hooks.invalid", port: 443, proxied: true) == nil)
        #expect(await policy.refusal(resolving: "localhost", port: 443, proxied: true) != nil)
        #expect(await policy.refusal(resolving: "169.254.169.254", port: 80, proxied: true)?.contains("link-local") == true)
    }

    @Test func backoffDoublesToItsMaximumAndStartsOverAfterASuccess() {
        var backoff = ErrorBackoff(initial: .milliseconds(100), maximum: .seconds(1))
        let waits = (0..<6).map { _ in backoff.failed() }
        #expect(waits == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
        let wasFailing = backoff.succeeded()
        let failingAgain = backoff.succeeded()
        #expect(wasFailing && !failingAgain)
        let first = backoff.failed()
        #expect(first == .milliseconds(100))
        for _ in 0..<10_000 { _ = backoff.failed() }
        let capped = backoff.failed()
        #expect(capped == .seconds(1))
    }

    @Test func webhookURLsToMetadataLinkLocalAndPrivateAddressesAreRefused() async throws {
        try await RouterHarness.withServer { server in
            for url in ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:9/hook", "http://localhost/hook", "http://[::1]/hook", "http://10.0.0.5/x"] {
                let response = try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "\#(url)"}"#)
                #expect(response.status == 400, "\(url): \(response.text)")
                #expect(try response.json()["field"]?.string == "webhookURL")
            }
            #expect(try await server.admin.get("/v1/apps/demo").json()["webhookURL"] == nil)
        }
        try await RouterHarness.withServer(configure: { $0.webhooks.allowPrivateNetworks = true }) { server in
            let loopback = try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "http://127.0.0.1:9/hook"}"#)
            #expect(loopback.status == 200)
            let metadata = try await server.admin.patch("/v1/apps/demo", #"{"webhookURL": "http://169.254.169.254/"}"#)
            #expect(metadata.status == 400)
        }
    }
}
