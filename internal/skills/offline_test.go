package skills

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// classifyCase is one tool with the primary skill a careful human would file
// it under ("" = no skill fits well, the tool should stay unclassified).
type classifyCase struct {
	server, name, description string
	params                    []string
	want                      string
}

// npmTools are the real tool lists of the npm servers the gateway is tested
// with (testdata/npm, captured with tools/list): server-everything
// 2026.8.31, server-filesystem and server-memory. Tools whose right skill
// is a matter of taste (simulate-research-query) are left out.
var npmTools = []classifyCase{
	{"everything", "echo", "Echoes back the input string", []string{"message"}, "utilities"},
	{"everything", "get-annotated-message", "Demonstrates how annotations can be used to provide metadata about content.", []string{"messageType", "includeImage"}, ""},
	{"everything", "get-env", "Returns all environment variables, helpful for debugging MCP server configuration", []string{}, "utilities"},
	{"everything", "get-resource-links", "Returns up to ten resource links that reference different types of resources", []string{"count"}, ""},
	{"everything", "get-resource-reference", "Returns a resource reference that can be used by MCP clients", []string{"resourceType", "resourceId"}, ""},
	{"everything", "get-structured-content", "Returns structured content along with an output schema for client data validation", []string{"location"}, ""},
	{"everything", "get-sum", "Returns the sum of two numbers", []string{"a", "b"}, "utilities"},
	{"everything", "get-tiny-image", "Returns a tiny MCP logo image.", []string{}, "media"},
	{"everything", "gzip-file-as-resource", "Compresses a single file using gzip compression. Depending upon the selected output type, returns either the compressed data as a gzipped resource or a resource link, allowing it to be downloaded in a subsequent request during the current session.", []string{"name", "data", "outputType"}, "file_system"},
	{"everything", "toggle-simulated-logging", "Toggles simulated, random-leveled logging on or off.", []string{}, "monitoring"},
	{"everything", "toggle-subscriber-updates", "Toggles simulated resource subscription updates on or off.", []string{}, ""},
	{"everything", "trigger-long-running-operation", "Demonstrates a long running operation with progress updates.", []string{"duration", "steps"}, ""},
	{"filesystem", "read_file", "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.", []string{"path", "tail", "head"}, "file_system"},
	{"filesystem", "read_text_file", "Read the complete contents of a file from the file system as text. Handles various text encodings and provides detailed error messages if the file cannot be read. Use this tool when you need to examine the contents of a single file. Use the 'head' parameter to read only the first N lines of a file, or the 'tail' parameter to read only the last N lines of a file. Operates on the file as text regardless of extension. Only works within allowed directories.", []string{"path", "tail", "head"}, "file_system"},
	{"filesystem", "read_media_file", "Read a file and return it as a base64-encoded content block with its MIME type. Image and audio files are returned as image/audio content; any other file type is returned as an embedded resource. Only works within allowed directories.", []string{"path"}, "file_system"},
	{"filesystem", "read_multiple_files", "Read the contents of multiple files simultaneously. This is more efficient than reading files one by one when you need to analyze or compare multiple files. Each file's content is returned with its path as a reference. Failed reads for individual files won't stop the entire operation. Only works within allowed directories.", []string{"paths"}, "file_system"},
	{"filesystem", "write_file", "Create a new file or completely overwrite an existing file with new content. Use with caution as it will overwrite existing files without warning. Handles text content with proper encoding. Only works within allowed directories.", []string{"path", "content"}, "file_system"},
	{"filesystem", "edit_file", "Make line-based edits to a text file. Each edit replaces exact line sequences with new content. Returns a git-style diff showing the changes made. Only works within allowed directories.", []string{"path", "edits", "dryRun"}, "file_system"},
	{"filesystem", "create_directory", "Create a new directory or ensure a directory exists. Can create multiple nested directories in one operation. If the directory already exists, this operation will succeed silently. Perfect for setting up directory structures for projects or ensuring required paths exist. Only works within allowed directories.", []string{"path"}, "file_system"},
	{"filesystem", "list_directory", "Get a detailed listing of all files and directories in a specified path. Results clearly distinguish between files and directories with [FILE] and [DIR] prefixes. This tool is essential for understanding directory structure and finding specific files within a directory. Only works within allowed directories.", []string{"path"}, "file_system"},
	{"filesystem", "list_directory_with_sizes", "Get a detailed listing of all files and directories in a specified path, including sizes. Results clearly distinguish between files and directories with [FILE] and [DIR] prefixes. This tool is useful for understanding directory structure and finding specific files within a directory. Only works within allowed directories.", []string{"path", "sortBy"}, "file_system"},
	{"filesystem", "directory_tree", "Get a recursive tree view of files and directories as a JSON structure. Each entry includes 'name', 'type' (file/directory), and 'children' for directories. Files have no children array, while directories always have a children array (which may be empty). The output is formatted with 2-space indentation for readability. Only works within allowed directories.", []string{"path", "excludePatterns"}, "file_system"},
	{"filesystem", "move_file", "Move or rename files and directories. Can move files between directories and rename them in a single operation. If the destination exists, the operation will fail. Works across different directories and can be used for simple renaming within the same directory. Both source and destination must be within allowed directories.", []string{"source", "destination"}, "file_system"},
	{"filesystem", "search_files", "Recursively search for files and directories matching a pattern. The patterns should be glob-style patterns that match paths relative to the working directory. Use pattern like '*.ext' to match files in current directory, and '**/*.ext' to match files in all subdirectories. Returns full paths to all matching items. Great for finding files when you don't know their exact location. Only searches within allowed directories.", []string{"path", "pattern", "excludePatterns"}, "file_system"},
	{"filesystem", "get_file_info", "Retrieve detailed metadata about a file or directory. Returns comprehensive information including size, creation time, last modified time, permissions, and type. This tool is perfect for understanding file characteristics without reading the actual content. Only works within allowed directories.", []string{"path"}, "file_system"},
	{"filesystem", "list_allowed_directories", "Returns the list of directories that this server is allowed to access. Subdirectories within these allowed directories are also accessible. Use this to understand which directories and their nested paths are available before trying to access files.", []string{}, "file_system"},
	{"memory", "create_entities", "Create multiple new entities in the knowledge graph", []string{"entities"}, "memory_knowledge"},
	{"memory", "create_relations", "Create multiple new relations between entities in the knowledge graph. Relations should be in active voice", []string{"relations"}, "memory_knowledge"},
	{"memory", "add_observations", "Add new observations to existing entities in the knowledge graph", []string{"observations"}, "memory_knowledge"},
	{"memory", "delete_entities", "Delete multiple entities and their associated relations from the knowledge graph", []string{"entityNames"}, "memory_knowledge"},
	{"memory", "delete_observations", "Delete specific observations from entities in the knowledge graph", []string{"deletions"}, "memory_knowledge"},
	{"memory", "delete_relations", "Delete multiple relations from the knowledge graph", []string{"relations"}, "memory_knowledge"},
	{"memory", "read_graph", "Read the entire knowledge graph", []string{}, "memory_knowledge"},
	{"memory", "search_nodes", "Search for nodes in the knowledge graph based on a query", []string{"query"}, "memory_knowledge"},
	{"memory", "open_nodes", "Open specific nodes in the knowledge graph by their names", []string{"names"}, "memory_knowledge"},
	// server-everything before its 2026 rename (the names most MCP docs show).
	{"everything", "echo", "Echoes back the input", []string{"message"}, "utilities"},
	{"everything", "add", "Adds two numbers", []string{"a", "b"}, "utilities"},
	{"everything", "longRunningOperation", "Demonstrates a long running operation with progress updates", []string{"duration", "steps"}, ""},
	{"everything", "sampleLLM", "Samples from an LLM using MCP's sampling feature", []string{"prompt", "maxTokens"}, "ai_models"},
	{"everything", "getTinyImage", "Returns the MCP_TINY_IMAGE", nil, "media"},
	{"everything", "printEnv", "Prints all environment variables, helpful for debugging MCP server configuration", nil, "utilities"},
	{"everything", "annotatedMessage", "Demonstrates how annotations can be used to provide metadata about content", []string{"messageType", "includeImage"}, ""},
	{"everything", "trigger-sampling-request", "Trigger a Request from the Server for LLM Sampling", []string{"prompt", "maxTokens"}, "ai_models"},
	{"everything", "trigger-elicitation-request", "Trigger a Request from the Server for User Elicitation", nil, ""},
}

// commonTools are tools of widely used MCP servers (GitHub, Slack, Postgres,
// Brave, Puppeteer, Google, Stripe, ...), names and descriptions as those
// servers publish them.
var commonTools = []classifyCase{
	{"github", "create_issue", "Create a new issue in a GitHub repository", []string{"owner", "repo", "title", "body", "labels"}, "issue_tracking"},
	{"github", "create_pull_request", "Create a new pull request in a GitHub repository", []string{"owner", "repo", "title", "head", "base"}, "code_management"},
	{"github", "search_repositories", "Search for GitHub repositories", []string{"query", "page"}, "code_management"},
	{"github", "list_commits", "Get list of commits of a branch in a GitHub repository", []string{"owner", "repo", "sha"}, "code_management"},
	{"gitlab", "create_merge_request", "Create a new merge request in a GitLab project", []string{"project_id", "title", "source_branch", "target_branch"}, "code_management"},
	{"atlassian", "jira_search", "Search Jira issues using JQL (Jira Query Language)", []string{"jql", "fields", "limit"}, "issue_tracking"},
	{"linear", "linear_create_issue", "Creates a new Linear issue with specified details", []string{"title", "teamId", "description", "priority"}, "issue_tracking"},
	{"slack", "slack_post_message", "Post a new message to a Slack channel", []string{"channel_id", "text"}, "communication"},
	{"slack", "slack_list_channels", "List public channels in the workspace with pagination", []string{"limit", "cursor"}, "communication"},
	{"postgres", "query", "Run a read-only SQL query", []string{"sql"}, "database"},
	{"sqlite", "list_tables", "List all tables in the SQLite database", nil, "database"},
	{"brave-search", "brave_web_search", "Performs a web search using the Brave Search API, ideal for general queries, news, articles, and online content.", []string{"query", "count", "offset"}, "web_search"},
	{"fetch", "fetch", "Fetches a URL from the internet and optionally extracts its contents as markdown.", []string{"url", "max_length", "raw"}, "web_search"},
	{"puppeteer", "puppeteer_navigate", "Navigate to a URL", []string{"url", "launchOptions"}, "browser_automation"},
	{"puppeteer", "puppeteer_screenshot", "Take a screenshot of the current page or a specific element", []string{"name", "selector", "width", "height"}, "browser_automation"},
	{"playwright", "browser_click", "Perform click on a web page", []string{"element", "ref"}, "browser_automation"},
	{"gmail", "send_email", "Sends a new email", []string{"to", "subject", "body", "cc", "bcc"}, "email"},
	{"google-calendar", "create_event", "Create a new calendar event", []string{"calendarId", "summary", "start", "end", "attendees"}, "calendar"},
	{"notion", "API-post-page", "Create a page in Notion", []string{"parent", "properties", "children"}, "documents"},
	{"aws", "list_ec2_instances", "List EC2 instances in a region", []string{"region", "filters"}, "cloud_infrastructure"},
	{"kubernetes", "pods_list", "List all the Kubernetes pods in the current cluster from all namespaces", []string{"labelSelector"}, "cloud_infrastructure"},
	{"datadog", "query_metrics", "Query timeseries metrics data from Datadog", []string{"query", "from", "to"}, "monitoring"},
	{"grafana", "search_dashboards", "Search for Grafana dashboards by a query string", []string{"query"}, "monitoring"},
	{"stripe", "create_payment_link", "Create a payment link in Stripe", []string{"price", "quantity"}, "payments"},
	{"stripe", "create_refund", "Refund a payment intent", []string{"payment_intent", "amount"}, "payments"},
	{"google-maps", "maps_geocode", "Convert an address into geographic coordinates", []string{"address"}, "maps_location"},
	{"google-maps", "maps_directions", "Get directions between two points", []string{"origin", "destination", "mode"}, "maps_location"},
	{"everart", "generate_image", "Generate images using EverArt models and return them as images", []string{"prompt", "model", "image_count"}, "media"},
	{"time", "get_current_time", "Get current time in a specific timezone", []string{"timezone"}, "utilities"},
	{"time", "convert_time", "Convert time between timezones", []string{"source_timezone", "time", "target_timezone"}, "utilities"},
	{"todoist", "todoist_create_task", "Create a new task in Todoist with optional description, due date, and priority", []string{"content", "description", "due_string", "priority"}, "project_management"},
	{"semgrep", "security_check", "Scan code for security vulnerabilities", []string{"code_files"}, "security"},
	{"pandas", "analyze_csv", "Load a CSV file into a dataframe and compute summary statistics", []string{"path", "columns"}, "data_analysis"},
	{"openai", "ask_openai", "Ask an OpenAI model a question and return its completion", []string{"prompt", "model", "temperature"}, "ai_models"},
	{"discord", "send_message", "Send a message to a Discord channel", []string{"channelId", "message"}, "communication"},
	// Added after the weights were fixed, as a check on over-fitting (15/20
	// right when first run; the misses are genuinely ambiguous or too terse).
	{"github", "get_file_contents", "Get the contents of a file or directory from a GitHub repository", []string{"owner", "repo", "path", "branch"}, "code_management"},
	{"github", "add_issue_comment", "Add a comment to an existing issue", []string{"owner", "repo", "issue_number", "body"}, "issue_tracking"},
	{"sentry", "get_sentry_issue", "Retrieve and analyze a Sentry issue by ID or URL", []string{"issue_id_or_url"}, "monitoring"},
	{"redis", "set", "Set a Redis string value with an optional expiration time", []string{"key", "value", "expireSeconds"}, "database"},
	{"mongodb", "find", "Run a find query against a MongoDB collection", []string{"database", "collection", "filter"}, "database"},
	{"exa", "web_search_exa", "Search the web using Exa AI", []string{"query", "numResults"}, "web_search"},
	{"telegram", "send_message", "Send a message to a chat", []string{"chat_id", "text"}, "communication"},
	{"outlook", "list_messages", "List messages in the mailbox", []string{"folder", "top"}, "email"},
	{"gdrive", "search", "Search for files in Google Drive", []string{"query"}, "file_system"},
	{"docker", "list_containers", "List all Docker containers", []string{"all"}, "cloud_infrastructure"},
	{"pagerduty", "list_incidents", "List incidents on PagerDuty", []string{"status"}, "monitoring"},
	{"sequential-thinking", "sequentialthinking", "A detailed tool for dynamic and reflective problem-solving through thoughts", []string{"thought", "nextThoughtNeeded"}, "ai_models"},
	{"youtube", "get_transcript", "Extract transcript from a YouTube video URL", []string{"url", "lang"}, "media"},
	{"weather", "get_forecast", "Get weather forecast for a location", []string{"latitude", "longitude"}, "maps_location"},
	{"shopify", "get_products", "Get all products or search by title", []string{"searchTitle", "limit"}, ""},
	{"obsidian", "search_notes", "Search for notes in the Obsidian vault", []string{"query"}, "documents"},
	{"jupyter", "execute_cell", "Execute a code cell in the notebook", []string{"cell_index"}, "data_analysis"},
	{"vault", "read_secret", "Read a secret from HashiCorp Vault", []string{"path"}, "security"},
	{"asana", "asana_list_workspaces", "List all available workspaces in Asana", nil, "project_management"},
	{"confluence", "confluence_search", "Search Confluence content using CQL", []string{"query"}, "documents"},
}

// TestOfflineAccuracy files every table tool and fails below 85% agreement
// with the expected primary skill. The figure is logged for the closing note.
func TestOfflineAccuracy(t *testing.T) {
	o := NewOffline(Default())
	cases := slices.Concat(npmTools, commonTools)
	if len(cases) < 30 {
		t.Fatalf("table has %d tools, want ≥ 30", len(cases))
	}
	var hits int
	var misses []string
	for _, tc := range cases {
		t.Run(tc.server+"."+tc.name, func(t *testing.T) {
			c := o.Classify(Tool{Name: tc.name, Description: tc.description, Server: tc.server, Params: tc.params})
			if c.Primary == tc.want {
				hits++
				return
			}
			misses = append(misses, fmt.Sprintf("%s.%s: got %q %v, want %q", tc.server, tc.name, c.Primary, c.Skills, tc.want))
		})
	}
	acc := float64(hits) / float64(len(cases))
	t.Logf("offline classification accuracy: %d/%d = %.1f%%", hits, len(cases), 100*acc)
	for _, m := range misses {
		t.Logf("miss: %s", m)
	}
	if acc < 0.85 {
		t.Errorf("accuracy %.1f%% below 85%%", 100*acc)
	}
}

// TestClassifyServer checks the siblings' prior: a terse tool takes its
// server's skill, a tool with strong evidence of its own keeps it, and a
// lone tool is classified as by Classify.
func TestClassifyServer(t *testing.T) {
	o := NewOffline(Default())
	grafana := []Tool{
		{Server: "grafana", Name: "query_metrics", Description: "Query Prometheus metrics for a dashboard panel"},
		{Server: "grafana", Name: "list_alerts", Description: "List firing alerts and incidents"},
		{Server: "grafana", Name: "search_logs", Description: "Search logs and traces of a service"},
		{Server: "grafana", Name: "get_dashboard", Description: "Get a Grafana dashboard with its panels"},
		{Server: "grafana", Name: "acknowledge_incident", Description: "Acknowledge an on-call incident"},
		{Server: "grafana", Name: "whoami", Description: "Identify the authenticated user"},
		{Server: "grafana", Name: "slack_post_message", Description: "Post an alert summary as a message to a Slack channel"},
	}
	tests := []struct {
		name  string
		tools []Tool
		idx   int
		want  string
	}{
		{"terse tool takes the server's skill", grafana, 5, "monitoring"},
		{"strong own evidence wins", grafana, 6, "communication"},
		{"alone, the server name is all the context", grafana[5:6], 0, "monitoring"},
		{"alone, without a telling server name", []Tool{{Server: "obs", Name: "whoami", Description: "Identify the authenticated user"}}, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := o.ClassifyServer(tc.tools)
			if len(got) != len(tc.tools) {
				t.Fatalf("%d classifications for %d tools", len(got), len(tc.tools))
			}
			if got[tc.idx].Primary != tc.want {
				t.Errorf("%s: primary %q %v, want %q", tc.tools[tc.idx].Name, got[tc.idx].Primary, got[tc.idx].Skills, tc.want)
			}
			if len(tc.tools) == 1 {
				if diff := cmp.Diff(o.Classify(tc.tools[0]), got[0]); diff != "" {
					t.Errorf("a lone tool differs from Classify (-want +got):\n%s", diff)
				}
			}
		})
	}
	if len(o.ClassifyServer(nil)) != 0 {
		t.Error("no tools, yet classifications")
	}
}
