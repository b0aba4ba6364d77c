package broker

import (
	"net"
	"regexp"
	"slices"
	"strings"

	"tidemark.io/services/broker/internal/kafkaapi"
	"tidemark.io/services/platform/config"
)

// Kafka's security protocols of a listener. SSL is TLS with client
// certificates (the certificate's Common Name is the principal, as on
// gRPC); PLAINTEXT has neither. SASL_PLAINTEXT and SASL_SSL log clients in
// with a user name and password (--sasl.enabled.mechanisms, credentials
// stored in etcd), without TLS or over TLS without client certificates:
// the user is the principal.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// KafkaListenerSpec is one named Kafka listener as the flags give it.
type KafkaListenerSpec struct {
	// Name is the listener's name, upper case (Kafka's listener names are
	// case-insensitive).
	Name string
	// Listen is the address its socket binds.
	Listen string
	// Advertised is the address clients that arrived on it are told to
	// dial; empty: the bound address.
	Advertised string
	// Protocol is one of the four Protocol constants.
	Protocol string
}

var listenerNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// KafkaListenerSpecs resolves the Kafka listeners the flags ask for: the
// named listeners of --kafka.listeners, or the one of the --kafka.listen
// shorthand (named after its protocol, as Kafka's default listener is), or
// none. The first listener is the one registered for brokers that predate
// named listeners.
func (c Config) KafkaListenerSpecs() ([]KafkaListenerSpec, error) {
	if len(c.KafkaListeners) == 0 {
		return c.singleKafkaListener()
	}
	if c.KafkaListen != "" {
		return nil, config.Invalid("kafka.listen", c.KafkaListen, "cannot be combined with --kafka.listeners %s: use --kafka.listeners alone", c.KafkaListeners)
	}
	if c.KafkaAdvertised != "" {
		return nil, config.Invalid("kafka.advertised.address", c.KafkaAdvertised, "cannot be combined with --kafka.listeners %s: use --kafka.advertised.listeners", c.KafkaListeners)
	}
	if c.KafkaListener != nil {
		return nil, config.Invalid("kafka.listeners", c.KafkaListeners, "a bound KafkaListener is for --kafka.listen; give KafkaNamedListeners")
	}
	protocols, err := c.kafkaProtocolMap()
	if err != nil {
		return nil, err
	}
	var specs []KafkaListenerSpec
	ports := map[string]string{}
	for _, entry := range c.KafkaListeners {
		name, addr, err := splitListener("kafka.listeners", entry)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(specs, func(s KafkaListenerSpec) bool { return s.Name == name }) {
			return nil, config.Invalid("kafka.listeners", c.KafkaListeners, "listener %s is named twice", name)
		}
		_, port, _ := net.SplitHostPort(addr)
		if other, dup := ports[port]; dup && port != "0" {
			return nil, config.Invalid("kafka.listeners", c.KafkaListeners, "listeners %s and %s both bind port %s: each needs its own", other, name, port)
		}
		ports[port] = name
		proto, err := c.listenerProtocol(name, protocols)
		if err != nil {
			return nil, err
		}
		specs = append(specs, KafkaListenerSpec{Name: name, Listen: addr, Protocol: proto})
	}
	seen := map[string]bool{}
	for _, entry := range c.KafkaAdvertisedListeners {
		name, addr, err := splitListener("kafka.advertised.listeners", entry)
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, config.Invalid("kafka.advertised.listeners", c.KafkaAdvertisedListeners, "listener %s is advertised twice", name)
		}
		seen[name] = true
		if host, _, _ := net.SplitHostPort(addr); host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified() {
			return nil, config.Invalid("kafka.advertised.listeners", entry, "needs a host clients can dial, not %q", host)
		}
		i := slices.IndexFunc(specs, func(s KafkaListenerSpec) bool { return s.Name == name })
		if i < 0 {
			return nil, config.Invalid("kafka.advertised.listeners", entry, "%s is not one of --kafka.listeners %s", name, c.KafkaListeners)
		}
		specs[i].Advertised = addr
	}
	if len(c.SASLMechanisms) > 0 {
		if err := kafkaapi.CheckSASLMechanisms(c.SASLMechanisms); err != nil {
			return nil, config.Invalid("sasl.enabled.mechanisms", c.SASLMechanisms, "%v", err)
		}
	}
	if c.KafkaNamedListeners != nil {
		for name := range c.KafkaNamedListeners {
			if !slices.ContainsFunc(specs, func(s KafkaListenerSpec) bool { return s.Name == name }) {
				return nil, config.Invalid("kafka.listeners", c.KafkaListeners, "a bound listener is given for %s, which is not one of them", name)
			}
		}
	}
	return specs, nil
}

// singleKafkaListener is the --kafka.listen shorthand: one listener, named
// SSL or PLAINTEXT after the protocol --plaintext chooses.
func (c Config) singleKafkaListener() ([]KafkaListenerSpec, error) {
	if len(c.KafkaAdvertisedListeners) > 0 {
		return nil, config.Invalid("kafka.advertised.listeners", c.KafkaAdvertisedListeners, "needs --kafka.listeners (with --kafka.listen, use --kafka.advertised.address)")
	}
	if len(c.KafkaProtocolMap) > 0 {
		return nil, config.Invalid("kafka.listener.security.protocol.map", c.KafkaProtocolMap, "needs --kafka.listeners (--kafka.listen's one listener follows --plaintext)")
	}
	if c.KafkaListen == "" {
		if c.KafkaAdvertised != "" {
			return nil, config.Invalid("kafka.advertised.address", c.KafkaAdvertised, "needs --kafka.listen")
		}
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(c.KafkaListen); err != nil {
		return nil, config.Invalid("kafka.listen", c.KafkaListen, "must be host:port")
	}
	if c.KafkaAdvertised != "" {
		if _, _, err := net.SplitHostPort(c.KafkaAdvertised); err != nil {
			return nil, config.Invalid("kafka.advertised.address", c.KafkaAdvertised, "must be host:port")
		}
	}
	proto := ProtocolSSL
	if c.TLS.Plaintext {
		proto = ProtocolPlaintext
	}
	return []KafkaListenerSpec{{Name: proto, Listen: c.KafkaListen, Advertised: c.KafkaAdvertised, Protocol: proto}}, nil
}

// splitListener parses NAME://host:port.
func splitListener(flagName, entry string) (name, addr string, err error) {
	name, addr, ok := strings.Cut(entry, "://")
	if !ok || !listenerNameRE.MatchString(name) {
		return "", "", config.Invalid(flagName, entry, "must be NAME://host:port with a name of letters, digits, _ or -")
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return "", "", config.Invalid(flagName, entry, "must be NAME://host:port")
	}
	return strings.ToUpper(name), addr, nil
}

// kafkaProtocolMap parses --kafka.listener.security.protocol.map.
func (c Config) kafkaProtocolMap() (map[string]string, error) {
	out := map[string]string{}
	for _, entry := range c.KafkaProtocolMap {
		name, proto, ok := strings.Cut(entry, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || !listenerNameRE.MatchString(name) {
			return nil, config.Invalid("kafka.listener.security.protocol.map", entry, "must be NAME:PROTOCOL")
		}
		if _, dup := out[name]; dup {
			return nil, config.Invalid("kafka.listener.security.protocol.map", c.KafkaProtocolMap, "listener %s is mapped twice", name)
		}
		switch proto {
		case ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL:
		default:
			return nil, config.Invalid("kafka.listener.security.protocol.map", entry, "unknown protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", proto)
		}
		out[name] = proto
	}
	return out, nil
}

// listenerProtocol is listener name's protocol. Secure by default: a
// listener is plain text only when the map says so or --plaintext turns
// TLS off everywhere; one the map leaves out follows --plaintext, and a
// name that reads as the other protocol must be mapped, so that no
// listener named PLAINTEXT quietly speaks TLS or one named SSL plain text.
// A listener named SASL_PLAINTEXT or SASL_SSL speaks that protocol
// unmapped, as in Kafka's default map.
func (c Config) listenerProtocol(name string, protocols map[string]string) (string, error) {
	broker := ProtocolSSL
	if c.TLS.Plaintext {
		broker = ProtocolPlaintext
	}
	proto, mapped := protocols[name]
	if !mapped && (name == ProtocolSASLPlaintext || name == ProtocolSASLSSL) {
		if name == ProtocolSASLSSL && c.TLS.Plaintext {
			return "", config.Invalid("kafka.listeners", c.KafkaListeners, "listener %s needs the broker's certificates, and --plaintext turns them off", name)
		}
		return name, nil
	}
	switch {
	case mapped && (proto == ProtocolSSL || proto == ProtocolSASLSSL) && c.TLS.Plaintext:
		return "", config.Invalid("kafka.listener.security.protocol.map", name+":"+proto, "an %s listener needs the broker's certificates, and --plaintext turns them off", proto)
	case mapped:
		return proto, nil
	case (name == ProtocolPlaintext || name == ProtocolSSL) && name != broker:
		return "", config.Invalid("kafka.listeners", c.KafkaListeners, "listener %s would speak %s (--plaintext is %v): map it in --kafka.listener.security.protocol.map, e.g. %s:%s", name, broker, c.TLS.Plaintext, name, name)
	}
	return broker, nil
}
