package replica

// SyncLogStartOffset records the log's current start offset in the replica's
// state machine. The log manager calls it after retention deleted segments:
// retention runs outside the replica's lock and moves only the log's start,
// and the state machine's copy is what the leader's divergence check (F13),
// its preferred-read-replica choice (KIP-392) and the progress reports use.
// Reading the log under mu records the newest start, whatever moved it.
func (m *Manager) SyncLogStartOffset(tp TP) {
	r, ok := m.Replica(tp)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state.SetLogStartOffset(r.log.LogStartOffset())
}
