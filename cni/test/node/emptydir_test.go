package node

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The audit's planted file (issue 23): a pod fills its socket directory (the dataplane, root,
// writes there) with a 64 MiB file. On the hostPath layout it lived in the node's /run and
// survived DEL and GC. Now the directory is the pod's emptyDir: once DEL has run and the kubelet
// has removed the pod's volumes (kubeletRemoves stands in for it), nothing of the pod is left
// under the socket root or the kubelet's dir, and GC finds nothing more to do.
func TestPlantedFilesGoWithThePod(t *testing.T) {
	n, p := newNet(t, "1.1.0"), newPod(900)
	n.mustAdd(p)
	// Through the path OVS uses, which leads where the dataplane's mount does.
	planted := filepath.Join(n.socketRoot(), p.uid, "planted")
	f, err := os.Create(planted)
	must(t, err)
	must(t, f.Truncate(64<<20))
	must(t, f.Close())
	if st, err := os.Stat(filepath.Join(n.podVolume(p), "planted")); err != nil || st.Size() != 64<<20 {
		t.Errorf("the socket directory is not the pod's emptyDir: %v %v", st, err)
	}
	n.mustDel(p)
	n.kubeletRemoves(p)
	n.gc()
	n.assertNothingLeft()
	if left := entries(filepath.Join(n.kubeletDir(), "pods")); len(left) != 0 {
		t.Errorf("left in the kubelet's pods dir: %v", left)
	}
}

// A node's chained conflist runs for every pod: with skipUnprepared, a pod that has no emptyDir
// fstack-vhost (not an F-Stack pod) keeps the previous result and gets no port, link or lease.
func TestChainedSkipsAPodWithoutTheEmptyDir(t *testing.T) {
	n, p := newNet(t, "1.0.0"), newPod(901)
	conf := n.pluginConf()
	conf["cniVersion"], conf["name"], conf["skipUnprepared"] = n.version, n.name, true
	conf["prevResult"] = map[string]any{"cniVersion": "1.0.0",
		"interfaces": []any{map[string]any{"name": "eth0", "sandbox": p.netns}},
		"ips":        []any{map[string]any{"address": "10.244.0.9/24", "interface": 0}}}
	stdin, _ := json.Marshal(conf)
	out, cerr := execPlugin("ADD", stdin, p.cniArgs(), p)
	if cerr != nil {
		t.Fatalf("chained ADD of an unprepared pod: %v", cerr)
	}
	var res struct{ Interfaces []struct{ Name string } }
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Interfaces) != 1 || res.Interfaces[0].Name != "eth0" {
		t.Fatalf("result %s (%v), want the previous one", out, err)
	}
	n.assertNothingLeft()
	if _, cerr := execPlugin("DEL", stdin, p.cniArgs(), p); cerr != nil {
		t.Fatalf("DEL: %v", cerr)
	}
}

// A pod that plants thousands of *.json files in its emptyDir does not make its DEL read them
// under the node-wide lock (cni/internal/plugin's unit test counts the reads): DEL removes the
// port and the attachment's own files and keeps the pod's link, which GC removes once the
// kubelet has removed the pod's volumes. Another pod's ADD and DEL meanwhile work as usual.
func TestPlantedDeviceInfosDoNotHoldDEL(t *testing.T) {
	n, p, other := newNet(t, "1.1.0"), newPod(902), newPod(903)
	n.mustAdd(p)
	for i := range 5000 {
		must(t, os.WriteFile(filepath.Join(n.podVolume(p), "p"+strconv.Itoa(i)+".json"), []byte(`{"type":"planted"}`), 0o644))
	}
	n.mustDel(p)
	if _, err := os.Stat(filepath.Join(n.podVolume(p), p.ifname+".json")); !os.IsNotExist(err) {
		t.Errorf("the attachment's device info is left: %v", err)
	}
	if ps := ports(t); len(ps) != 0 {
		t.Errorf("ports left: %v", ps)
	}
	n.mustAdd(other)
	n.mustDel(other)
	n.kubeletRemoves(p)
	n.kubeletRemoves(other)
	n.gc()
	n.assertNothingLeft()
}
