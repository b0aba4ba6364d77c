package authz

import "context"

// kafkaOpCodes are Kafka's AclOperation codes, the bit positions of the
// authorized-operations fields of its Metadata and DescribeGroups answers.
// InjectFault has none: Kafka clients cannot ask for it.
var kafkaOpCodes = map[Operation]int{
	All: 2, Read: 3, Write: 4, Create: 5, Delete: 6, Alter: 7, Describe: 8,
	DescribeConfigs: 10, AlterConfigs: 11, IdempotentWrite: 12,
}

// AuthorizedOperations is Kafka's authorized-operations bit field of res
// for the principal in ctx: bit N is set for each operation with code N
// that the principal may do on res, among those that mean something on
// its type (All excluded, as Kafka's supportedOperations). With
// authorization off every such operation is set, as Kafka answers without
// an authorizer.
func (a *Authorizer) AuthorizedOperations(ctx context.Context, res Resource) int32 {
	var bits int32
	for _, op := range validOps[res.Type] {
		c, ok := kafkaOpCodes[op]
		if !ok || op == All {
			continue
		}
		if a.Allowed(ctx, op, res) {
			bits |= 1 << c
		}
	}
	return bits
}
