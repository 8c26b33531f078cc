package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kube-fstack/kube-fstack/internal/inject"
)

// Version is the plugin's version, set when it is built for a release:
// go build -ldflags "-X github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli.Version=v0.1.0".
var Version = "dev"

// ImageRepo is where the images of the plugin's release live, without the component (release.sh's
// IMAGE_REPO), set with Version when it is built for a release (hack/krew-release.sh):
// -X github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli.ImageRepo=registry.example/kube-fstack.
var ImageRepo = "localhost/kube-fstack"

// DataplaneDigest is the digest of the dataplane image released with this plugin (release.sh's
// images/dataplane.digest), set with Version by hack/krew-release.sh when the release built that
// image: -X github.com/kube-fstack/kube-fstack/kubectl-fstack/internal/cli.DataplaneDigest=sha256:....
var DataplaneDigest = ""

// DefaultDataplaneImage is what inject gives the dataplane container when neither --image nor the
// StackInstance names an image: the dataplane image released with this plugin, so that a released
// plugin's output runs the release's image and not a local build. A release names it by digest,
// as its chart does: a tag can be moved to another image, and admission policies that verify
// signatures want the digest they were signed for. A dev build names the local build
// (localhost/kube-fstack/dataplane:dev), as the operator's own default does.
func DefaultDataplaneImage() string {
	if DataplaneDigest != "" {
		return ImageRepo + "/dataplane@" + DataplaneDigest
	}
	return ImageRepo + "/dataplane:" + Version
}

// PinnedFStackCommit is the F-Stack commit the dataplane image of this source tree is built from
// (dataplane-image/build/build-fstack.sh pins it; a test keeps the two equal). The image carries
// it as the label io.kubefstack.fstack-commit, which only the node's container runtime can read:
// no API object exposes an image's labels.
const PinnedFStackCommit = "761639943bdda33103aa98241ca6a3079f1c1b7e"

// operatorSelector finds the operator's Deployment by the chart's labels.
var operatorSelector = client.MatchingLabels{"app.kubernetes.io/part-of": "kube-fstack", "app.kubernetes.io/component": "operator"}

// VersionInfo is what `version -o json|yaml` prints.
type VersionInfo struct {
	metav1.TypeMeta `json:",inline"`
	// Plugin is this binary's version ("dev" unless built for a release).
	Plugin string `json:"plugin"`
	// FStackCommit is the F-Stack commit this release's dataplane image is built from.
	FStackCommit string `json:"fstackCommit"`
	// Operators are the operator Deployments found (by the chart's labels), none with --client.
	Operators []OperatorVersion `json:"operators"`
	// ClusterError says why the cluster could not be asked; the exit status is then 1.
	ClusterError string `json:"clusterError,omitempty"`
}

// OperatorVersion is one operator Deployment.
type OperatorVersion struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Image is the operator container's image: what runs, whatever the chart's appVersion says.
	Image string `json:"image"`
	// ChartVersion is the Deployment's app.kubernetes.io/version label (the chart's appVersion).
	ChartVersion string `json:"chartVersion,omitempty"`
	// DataplaneImage is the operator's --dataplane-image: what StackInstances naming no image run.
	DataplaneImage string `json:"dataplaneImage"`
}

type versionOptions struct {
	clusterFlags
	output     *outputFlags
	clientOnly bool
}

func newVersionCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version [--client] [-o json|yaml]",
		Short: "Print the plugin's version, the F-Stack commit of its dataplane image, and the operator's image and configured dataplane image",
		Long: `Print the plugin's version and the F-Stack commit its release's dataplane image is built from
(the image's label io.kubefstack.fstack-commit), then, from the cluster, each kube-fstack operator
Deployment (found by the chart's labels): its image, its chart's appVersion and the dataplane image
it injects. When the cluster cannot be reached the plugin's part is printed and the exit status is
1, as for kubectl version; --client asks no cluster.`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return o.run(stdout, stderr)
		},
	}
	o.add(cmd.Flags())
	o.output = newOutputFlags(cmd)
	cmd.Flags().BoolVar(&o.clientOnly, "client", false, "print the plugin's part only, ask no cluster")
	return cmd
}

func (o *versionOptions) run(stdout, stderr io.Writer) error {
	if table, wide := o.output.table(); table && wide {
		return fmt.Errorf("--output wide: version has no table; use json or yaml, or no -o")
	}
	if err := o.output.validate(); err != nil {
		return err
	}
	v := &VersionInfo{TypeMeta: metav1.TypeMeta{APIVersion: OutputGroupVersion.String(), Kind: "VersionInfo"},
		Plugin: Version, FStackCommit: PinnedFStackCommit, Operators: []OperatorVersion{}}
	if !o.clientOnly {
		if err := o.operators(v); err != nil {
			v.ClusterError = err.Error()
		}
	}
	if table, _ := o.output.table(); table {
		writeVersion(stdout, v, o.clientOnly)
	} else if err := o.output.printObject(v, stdout); err != nil {
		return err
	}
	if v.ClusterError != "" {
		fmt.Fprintln(stderr, "error:", safe(v.ClusterError))
		return errReported
	}
	return nil
}

func (o *versionOptions) operators(v *VersionInfo) error {
	cfg, _, err := o.restConfig()
	if err != nil {
		return err
	}
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	list := &appsv1.DeploymentList{}
	if err := c.List(context.Background(), list, operatorSelector); err != nil {
		return fmt.Errorf("list the operator's Deployments: %w", err)
	}
	v.Operators = operatorVersions(list.Items)
	return nil
}

// operatorVersions reads each operator Deployment's pod template: the "operator" container's
// image and its --dataplane-image argument (the operator's own default when it has none).
func operatorVersions(deps []appsv1.Deployment) []OperatorVersion {
	out := []OperatorVersion{}
	for _, d := range deps {
		ov := OperatorVersion{Namespace: d.Namespace, Name: d.Name, ChartVersion: d.Labels["app.kubernetes.io/version"]}
		cs := d.Spec.Template.Spec.Containers
		pick := slices.IndexFunc(cs, func(c corev1.Container) bool { return c.Name == "operator" })
		if pick < 0 && len(cs) > 0 {
			pick = 0 // a Deployment made without the chart may name its container otherwise
		}
		if pick >= 0 {
			ov.Image = cs[pick].Image
			for _, a := range append(append([]string{}, cs[pick].Command...), cs[pick].Args...) {
				if img, ok := strings.CutPrefix(a, "--dataplane-image="); ok {
					ov.DataplaneImage = img
				}
			}
		}
		if ov.DataplaneImage == "" {
			ov.DataplaneImage = inject.DefaultConfig().Image + " (the operator's default)"
		}
		out = append(out, ov)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace < out[j].Namespace || out[i].Namespace == out[j].Namespace && out[i].Name < out[j].Name
	})
	return out
}

func writeVersion(w io.Writer, v *VersionInfo, clientOnly bool) {
	fmt.Fprintf(w, "Plugin version: %s\n", v.Plugin)
	fmt.Fprintf(w, "F-Stack commit: %s (the dataplane image's label io.kubefstack.fstack-commit)\n", v.FStackCommit)
	switch {
	case clientOnly:
	case v.ClusterError != "":
		fmt.Fprintln(w, "Operator: unknown (the cluster could not be asked)")
	case len(v.Operators) == 0:
		fmt.Fprintln(w, "Operator: none found (no Deployment labelled app.kubernetes.io/part-of=kube-fstack, app.kubernetes.io/component=operator)")
	}
	for _, op := range v.Operators {
		// The Deployment is anyone's with the right to edit it.
		fmt.Fprintf(w, "Operator %s/%s: image %s, chart appVersion %s\n", safe(op.Namespace), safe(op.Name), safe(op.Image), safe(orDash(op.ChartVersion)))
		fmt.Fprintf(w, "  dataplane image: %s\n", safe(op.DataplaneImage))
	}
}
