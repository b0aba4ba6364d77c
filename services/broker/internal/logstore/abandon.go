package logstore

import "maps"

// Abandon closes the log's files the way a crash leaves them: no flush, no
// index completion, no producer snapshot. Written data stays in the OS page
// cache (an in-process "kill -9"); the next Open recovers as after an
// unclean shutdown. Later calls do nothing.
func (l *Log) Abandon() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	for _, s := range l.segments() {
		_ = s.closeFiles()
	}
	l.filesClosed = true
}

// Abandon stops the background work and abandons every log without writing
// checkpoints or the clean-shutdown marker, as a crashed broker would: the
// next OpenManager runs crash recovery.
func (m *Manager) Abandon() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed, m.abandoned = true, true
	// A crash leaves no writer behind: in-flight creations and deletions
	// finish (abandoning a log they opened) before the logs are abandoned.
	m.waitAllIdleLocked()
	logs := maps.Clone(m.logs)
	m.mu.Unlock()
	m.removing.Wait()
	if m.stop != nil {
		close(m.stop)
		<-m.done
		if m.cleanerDone != nil {
			<-m.cleanerDone
		}
	}
	for _, l := range logs {
		l.Abandon()
	}
}
