package inject

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-fstack/kube-fstack/internal/podcontract"
)

// Every pod the webhook admits gets a status token of its own (podcontract.EnvStatusToken on the
// dataplane container): the supervisor answers /status and /config to the node and to requests
// that carry it. A container's environment cannot change once the pod exists, so the pod keeps
// its token for its life. A pod that arrives already injected keeps a valid token it carries (a
// copy shares its original's: whoever made it read the original's spec) and gets one when it
// has none: a workload injected offline (`kubectl fstack inject`, which writes none, so that a
// template does not give every replica one token, or put it in a manifest), or a pod an older
// injector made.

// newStatusToken draws a token from c.StatusTokens.
func (c *Config) newStatusToken() (string, error) {
	src := c.StatusTokens
	if src == nil {
		src = rand.Reader
	}
	b := make([]byte, podcontract.StatusTokenBytes)
	if _, err := io.ReadFull(src, b); err != nil {
		return "", fmt.Errorf("draw the pod's status token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// statusTokenEnv is the dataplane container's variable, or none without a token.
func statusTokenEnv(token string) []corev1.EnvVar {
	if token == "" {
		return nil
	}
	return []corev1.EnvVar{{Name: podcontract.EnvStatusToken, Value: token}}
}

// StatusToken is the pod's status token, from its dataplane container (the injected init
// container, or a program's regular one), or "" when it has none that podcontract accepts: the
// value is the pod creator's to write, so it is checked before anyone sends it.
func StatusToken(pod *corev1.Pod) string {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name != podcontract.DataplaneContainer {
				continue
			}
			for _, e := range list[i].Env {
				if e.Name == podcontract.EnvStatusToken && e.ValueFrom == nil && podcontract.ValidStatusToken(e.Value) {
					return e.Value
				}
			}
		}
	}
	return ""
}

// EnsureStatusToken gives an already injected pod's dataplane container a status token when it
// has no valid one, in place, and says whether it changed the pod. The webhook calls it for the
// pods Decide skips as already injected; unless cfg.OmitStatusToken.
func EnsureStatusToken(pod *corev1.Pod, cfg Config) (bool, error) {
	if cfg.OmitStatusToken || StatusToken(pod) != "" {
		return false, nil
	}
	var dp *corev1.Container
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		if i := slices.IndexFunc(list, func(c corev1.Container) bool { return c.Name == podcontract.DataplaneContainer }); i >= 0 && dp == nil {
			dp = &list[i]
		}
	}
	if dp == nil {
		return false, nil
	}
	token, err := cfg.newStatusToken()
	if err != nil {
		return false, err
	}
	// An invalid value (or one from a reference) is replaced: the variable is the injection's.
	dp.Env = slices.DeleteFunc(dp.Env, func(e corev1.EnvVar) bool { return e.Name == podcontract.EnvStatusToken })
	dp.Env = append(dp.Env, statusTokenEnv(token)...)
	return true, nil
}
