package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/apiclient"
	"github.com/switchboard-mcp/switchboard/internal/skills"
)

func newTools(e *env) *cobra.Command {
	r := &remote{e: e}
	var server string
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the tools you may call, as server.tool",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client()
			if err != nil {
				return err
			}
			list, err := c.Tools(cmdContext(cmd), server)
			if err != nil {
				return explain(err, "tool listing")
			}
			if done, err := r.structured(list); done {
				return err
			}
			if len(list.Tools) == 0 {
				fmt.Fprintln(e.stdout, "no tools")
				return nil
			}
			t := &table{header: []string{"TOOL", "SERVER", "STATUS", "SKILL", "DESCRIPTION"}}
			for _, tool := range list.Tools {
				desc := tool.Description
				if desc == "" {
					desc = tool.Title
				}
				t.add(cell{text: tool.Name}, cell{text: tool.ServerName}, cell{text: tool.ServerStatus, color: stateColor(tool.ServerStatus)},
					cell{text: skillCell(tool.Skills)}, cell{text: orDash(clip(desc, 70))})
			}
			return t.render(e.stdout, r.color())
		},
	}
	cmd.Flags().StringVar(&server, "server", "", "only this server's tools")
	r.register(cmd)
	r.registerOutput(cmd)
	cmd.AddCommand(newToolsQuarantined(r), newToolsApprove(r))
	return cmd
}

func newSearch(e *env) *cobra.Command {
	r := &remote{e: e}
	var (
		servers, skills []string
		limit           int
	)
	cmd := &cobra.Command{
		Use:   "search <query>",
		Short: "Find tools by what they do",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			if limit < 1 || limit > 100 {
				return usageError{errors.New("--limit must be in 1..100")}
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			res, err := c.Search(cmdContext(cmd), apiclient.SearchRequest{Query: strings.Join(a, " "),
				ServerFilter: servers, SkillFilter: skills, Limit: limit})
			if err != nil {
				return explain(err, "search")
			}
			if done, err := r.structured(res); done {
				return err
			}
			if len(res.Tools) == 0 {
				fmt.Fprintf(e.stdout, "no tools match (searched %d tools)\n", res.Metadata.TotalToolsSearched)
				return nil
			}
			t := &table{header: []string{"#", "TOOL", "SCORE", "SERVER", "SKILL", "DESCRIPTION"}}
			for i, tool := range res.Tools {
				t.add(cell{text: strconv.Itoa(i + 1)}, cell{text: tool.Name}, cell{text: strconv.FormatFloat(tool.Score, 'f', 2, 64)},
					cell{text: tool.SourceServer.Name}, cell{text: skillCell(tool.Skills)}, cell{text: orDash(clip(tool.Description, 60))})
			}
			if err := t.render(e.stdout, r.color()); err != nil {
				return err
			}
			if res.Metadata.Degraded != "" {
				fmt.Fprintf(e.stderr, "switchboard: ranking was %s only: %s\n", res.Metadata.Ranking, res.Metadata.Degraded)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&servers, "server", nil, "only tools of this server (repeatable)")
	cmd.Flags().StringArrayVar(&skills, "skill", nil, "only tools of this skill (repeatable)")
	cmd.Flags().IntVar(&limit, "limit", 10, "at most this many results (1..100)")
	r.register(cmd)
	r.registerOutput(cmd)
	return cmd
}

// skillCell shows a tool's most likely skill with the classifier's
// confidence in it ("file_system 0.81"), so a reader can tell a sure
// filing from a guess; below the primary threshold the skill is not the
// tool's primary one and is marked with "?". "-" when nothing fits or the
// gateway has not classified the tool.
func skillCell(as []skills.Assignment) string {
	if len(as) == 0 {
		return "-"
	}
	s := as[0].SkillID + " " + strconv.FormatFloat(as[0].Confidence, 'f', 2, 64)
	if as[0].Confidence < skills.PrimaryThreshold {
		s += "?"
	}
	return s
}

func newCall(e *env) *cobra.Command {
	r := &remote{e: e}
	var (
		args                        []string
		jsonArgs, idemKey, approval string
	)
	cmd := &cobra.Command{
		Use:   "call <server.tool>",
		Short: "Call a tool and print its result",
		Long: `Call a tool through the gateway's pipeline and print its result text (the
whole answer with -o json). Arguments come from --json (an object) and then
--arg k=v, whose value is parsed as JSON when it parses ("3", "true",
'["a"]') and taken as a string otherwise. Exit status 1 when the call fails
or the tool reports an error.`,
		Example: `  switchboard call demo.add --arg a=2 --arg b=3
  switchboard call demo.echo --json '{"text": "hello"}'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			arguments, err := callArguments(jsonArgs, args)
			if err != nil {
				return err
			}
			c, err := r.client()
			if err != nil {
				return err
			}
			res, err := c.CallTool(cmdContext(cmd), apiclient.CallRequest{Name: a[0], Arguments: arguments,
				IdempotencyKey: idemKey, ApprovalToken: approval})
			if err != nil {
				return explain(err, "tool calls")
			}
			if done, err := r.structured(res); done {
				if err == nil && res.IsError {
					return exitError{code: ExitFailure}
				}
				return err
			}
			text := res.Text()
			if text == "" && res.StructuredContent != nil {
				raw, _ := json.MarshalIndent(res.StructuredContent, "", "  ")
				text = string(raw)
			}
			if text != "" {
				fmt.Fprintln(e.stdout, text)
			}
			if res.IsError {
				fmt.Fprintf(e.stderr, "switchboard: %s reported an error\n", a[0])
				return exitError{code: ExitFailure}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&args, "arg", nil, "argument k=v (v as JSON if it parses, else a string); repeatable")
	f.StringVar(&jsonArgs, "json", "", "arguments as a JSON object")
	f.StringVar(&idemKey, "idempotency-key", "", "replay-safe key: the same key returns the first call's result")
	f.StringVar(&approval, "approval-token", "", "approval token for a high-risk tool")
	r.register(cmd)
	r.registerOutput(cmd)
	return cmd
}

// callArguments merges --json and --arg into one JSON object; nil when
// neither was given.
func callArguments(jsonArgs string, kvs []string) (json.RawMessage, error) {
	if jsonArgs == "" && len(kvs) == 0 {
		return nil, nil
	}
	obj := map[string]json.RawMessage{}
	if jsonArgs != "" {
		dec := json.NewDecoder(strings.NewReader(jsonArgs))
		if err := dec.Decode(&obj); err != nil || obj == nil {
			return nil, usageError{fmt.Errorf("--json: want a JSON object, like '{\"text\": \"hi\"}'")}
		}
		if dec.More() {
			return nil, usageError{errors.New("--json: trailing data after the object")}
		}
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--arg %q: want key=value", kv)}
		}
		if json.Valid([]byte(v)) && strings.TrimSpace(v) != "" {
			var buf bytes.Buffer
			if err := json.Compact(&buf, []byte(v)); err == nil {
				obj[k] = buf.Bytes()
				continue
			}
		}
		s, _ := json.Marshal(v)
		obj[k] = s
	}
	return json.Marshal(obj)
}
