package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// What the supervisor could not keep apart (issue 40 §1: an lcore beside the switch's PMD or
// the app's workers serves a fraction of what it could) is said on the pod, where `kubectl
// describe pod` and `kubectl get events` show it, in the words `kubectl fstack status` uses
// (podcontract.Placement.SharedCPUs). The operator asks once, at the pod's first readiness,
// when the supervisor has placed its lcores and answers /status from memory: the pod's
// creation stays free of it, and a well-placed pod costs no API write.

// placementEvent is the CPUsShared event for what st's placement shares, or nil: nothing
// shared, nothing read, or the same already said for this pod. Its name is the pod's UID and
// note hashed, so the same note on the same pod is one Event across replicas and restarts.
func placementEvent(uid types.UID, h *podHealth, st *podcontract.DataplaneStatus) *podEvent {
	if st == nil {
		return nil
	}
	text := st.Placement.SharedCPUs()
	if text == "" {
		return nil
	}
	text = note(text)
	sum := sha256.Sum256([]byte(string(uid) + "\n" + text))
	name := strings.ToLower(EventCPUsShared) + "-" + hex.EncodeToString(sum[:8])
	if h.placementSaid == name {
		return nil
	}
	h.placementSaid = name
	return &podEvent{kind: corev1.EventTypeWarning, reason: EventCPUsShared, note: text, name: name}
}

// readTurn is how long the pod waits for its read of /status within the reads' rate shared by
// every pod; 0: read now. The turn is reserved at the first ask and kept across the requeues,
// so pods are read in the order they asked, at the rate, and no worker waits.
func (r *PodHealthReconciler) readTurn(h *podHealth) time.Duration {
	if r.reads == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if h.readAt.IsZero() {
		h.readAt = now.Add(r.reads.ReserveN(now, 1).DelayFrom(now))
	}
	if wait := h.readAt.Sub(now); wait > 0 {
		return wait
	}
	h.readAt = time.Time{}
	return 0
}
