// Command send is the "send an email" step of the notify example: it keeps
// the message as an artifact, sends it to a mail sink as an http effect
// through the effect journal (so a crash between the send and its record
// still yields exactly one email), and reports its progress.
//
//	GOOS=wasip1 GOARCH=wasm go build -o plugins/examples/notify/send.wasm ./plugins/examples/notify/send
package main

import (
	"encoding/json"
	"fmt"

	sdk "github.com/lhengine/lhengine/plugins/sdk/go"
)

type input struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
	Sink    string `json:"sink"`
}

type output struct {
	To       string `json:"to"`
	Status   int    `json:"status"`
	Replayed bool   `json:"replayed"`
	Message  string `json:"message"` // artifact ref of the message
}

func main() {
	sdk.Run(func(ctx *sdk.Context, in input) (output, error) {
		msg := fmt.Sprintf("To: %s\nSubject: %s\n\n%s\n", in.To, in.Subject, in.Body)
		ref, err := ctx.PutArtifact("message-"+in.To+".txt", "text/plain", []byte(msg))
		if err != nil {
			return output{}, fmt.Errorf("keeping the message: %w", err)
		}
		body, _ := json.Marshal(map[string]string{"to": in.To, "subject": in.Subject, "body": in.Body})
		var res sdk.HTTPEffectResult
		replayed, err := ctx.EffectReplayed("email-"+in.To, sdk.EffectHTTP, sdk.HTTPEffect{
			Method: "POST", URL: in.Sink, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body),
		}, &res)
		if err != nil {
			return output{}, fmt.Errorf("sending to %s: %w", in.To, err)
		}
		if err := ctx.Count("emails", 1); err != nil {
			return output{}, err
		}
		if err := ctx.Note("decision", "emailed "+in.To); err != nil {
			return output{}, err
		}
		return output{To: in.To, Status: res.Status, Replayed: replayed, Message: ref.Ref}, nil
	})
}
