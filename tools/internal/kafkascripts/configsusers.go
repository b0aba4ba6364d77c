package kafkascripts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"tidemark.io/services/platform/scram"
)

// Kafka's tool's SCRAM defaults (ConfigCommand.DefaultScramIterations,
// ScramMechanism.minIterations).
const (
	defaultScramIterations = 4096
	minScramIterations     = 4096
)

// scramMechanismCode is a mechanism's number in the SCRAM credential APIs.
func scramMechanismCode(name string) int8 {
	switch name {
	case scram.SHA256:
		return 1
	case scram.SHA512:
		return 2
	}
	return 0
}

func scramMechanismName(code int8) string {
	switch code {
	case 1:
		return scram.SHA256
	case 2:
		return scram.SHA512
	}
	return "UNKNOWN"
}

// scramCredentialPattern is the value of an added SCRAM config, its
// brackets taken off: [iterations=N,]password=P.
var scramCredentialPattern = regexp.MustCompile(`^(?:iterations=(-?[0-9]*),)?password=(.*)$`)

// alterUsers is ConfigCommand's alter of a user's SCRAM credentials: the
// configs added are mechanisms with a password (salted here, as Kafka's
// admin client does, so the password never leaves the tool), the configs
// deleted mechanisms, all in one AlterUserScramCredentials. The keys were
// sorted out by runUsersAndClients (configsquotas.go).
func alterUsers(ctx context.Context, adm *seedAdmin, user string, add map[string]string, addNames, del []string) error {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, k := range del {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, scramMechanismCode(k)
		req.Deletions = append(req.Deletions, d)
	}
	for _, k := range addNames {
		m := scramCredentialPattern.FindStringSubmatch(add[k])
		if m == nil {
			// Kafka's message names the mechanism as its Java enum.
			return &configRefusal{fmt.Sprintf("Invalid credential property %s=%s", strings.ReplaceAll(k, "-", "_"), add[k])}
		}
		iterations := defaultScramIterations
		if m[1] != "" && m[1] != "-1" {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				return &configRefusal{fmt.Sprintf("For input string: \"%s\"", m[1])}
			}
			iterations = n
		}
		if iterations < minScramIterations {
			return &configRefusal{fmt.Sprintf("Iterations %d is less than the minimum %d required for %s", iterations, minScramIterations, k)}
		}
		salt, err := scramSalt()
		if err != nil {
			return err
		}
		salted, err := scram.SaltPassword(k, m[2], salt, iterations)
		if err != nil {
			return err
		}
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, scramMechanismCode(k), int32(iterations), salt, salted
		req.Upsertions = append(req.Upsertions, u)
	}
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	for _, res := range kresp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		if res.ErrorCode != 0 {
			return errors.New(javaExceptionWith(res.ErrorCode, res.ErrorMessage))
		}
	}
	return nil
}

// scramSalt is a salt as Kafka's admin client makes one: the base-36 text
// of a 130-bit random number.
func scramSalt() ([]byte, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 130))
	if err != nil {
		return nil, err
	}
	return []byte(n.Text(36)), nil
}

// describeUsers is ConfigCommand's describe of users: one line per user
// with SCRAM credentials (all users, or the one named), in the answer's
// order; a user without any is left out, as Kafka's admin client does.
// The user's quota lines come first (configsquotas.go).
func describeUsers(ctx context.Context, adm *seedAdmin, names []string, stdout io.Writer) error {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, n := range names {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = n
		req.Users = append(req.Users, u)
	}
	kresp, err := adm.request(ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if resp.ErrorCode != 0 {
		return errors.New(javaExceptionWith(resp.ErrorCode, resp.ErrorMessage))
	}
	for _, res := range resp.Results {
		switch res.ErrorCode {
		case 0:
		case 91: // RESOURCE_NOT_FOUND: no credentials
			continue
		default:
			fmt.Fprintf(stdout, "Error retrieving SCRAM credential configs for user-principal '%s': ExecutionException: %s\n", res.User, javaExceptionWith(res.ErrorCode, res.ErrorMessage))
			continue
		}
		var infos []string
		for _, ci := range res.CredentialInfos {
			infos = append(infos, fmt.Sprintf("%s=iterations=%d", scramMechanismName(ci.Mechanism), ci.Iterations))
		}
		fmt.Fprintf(stdout, "SCRAM credential configs for user-principal '%s' are %s\n", res.User, strings.Join(infos, ", "))
	}
	return nil
}
