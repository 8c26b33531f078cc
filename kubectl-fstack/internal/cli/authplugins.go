package cli

// The client auth plugins kubectl itself links (kubectl.go imports this package): a kubeconfig
// user with auth-provider oidc, and the azure and gcp stubs that tell the user which exec plugin
// replaced them. The exec credential plugins are client-go's own. In a file of its own because
// goimports and gci place a commented import inside a group differently (a blank line before
// the comment, or none), and make lint runs both.
import _ "k8s.io/client-go/plugin/pkg/client/auth"
