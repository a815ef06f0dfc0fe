package signature

// Discord signs interactions and webhook events with ed25519 over the
// timestamp followed directly by the body, the signature in hex; the
// application's public key is shown in hex in the developer portal
// (https://discord.com/developers/docs/interactions/receiving-and-responding#security-and-authorization).
// Interactions and events carry a top-level id (events: none) and type.
const (
	headerDiscordSignature = "X-Signature-Ed25519"
	headerDiscordTimestamp = "X-Signature-Timestamp"
)

func init() {
	newEdScheme(SchemeDiscord, headerDiscordSignature, headerDiscordTimestamp, "", true).
		register([]source{field("id")}, []source{field("type")})
}
