package skills

import (
	"github.com/switchboard-mcp/switchboard/internal/textnorm"
	"strings"
	"unicode"
)

// token is one word of tool or skill text: the surface form (lower case, as
// written, used to name suggestions) and its stem (used for matching).
type token struct {
	word string
	stem string
}

// tokenize splits text into words the way tool names are written by MCP
// servers: snake_case, kebab-case, camelCase, dotted namespaces and prose all
// end up as the same lower-case words, so "getTinyImage", "get-tiny-image" and
// "get tiny image" match. Stop words are dropped, a few common abbreviations
// are expanded, and each word is stemmed lightly.
func tokenize(text string) []token { return tokenizeStop(text, true) }

// tokenizeStop is tokenize with the choice to keep stop words: a tool named
// just "add" or "list" has nothing else to go by, and a skill keyword is a
// deliberate choice even when it is a common word.
func tokenizeStop(text string, dropStop bool) []token {
	var out []token
	for _, w := range splitWords(text) {
		for _, x := range expand(w) {
			if len(x) < 2 || (dropStop && stopWords[x]) || isNumber(x) {
				continue
			}
			out = append(out, token{word: x, stem: textnorm.Stem(x)})
		}
	}
	return out
}

// splitWords cuts at every non-alphanumeric rune and at camelCase humps
// ("HTTPServer" → "http", "server"; "sampleLLM" → "sample", "llm"), except
// in brand names written in camel case ("GitHub", "PayPal").
func splitWords(s string) []string {
	var words []string
	for _, run := range strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if lower := strings.ToLower(run); compounds[lower] {
			words = append(words, lower)
			continue
		}
		words = append(words, splitCamel([]rune(run))...)
	}
	return words
}

func splitCamel(rs []rune) []string {
	var words []string
	start := 0
	for i := 1; i < len(rs); i++ {
		r, prev := rs[i], rs[i-1]
		if unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev) ||
			(unicode.IsUpper(prev) && i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
			words = append(words, strings.ToLower(string(rs[start:i])))
			start = i
		}
	}
	return append(words, strings.ToLower(string(rs[start:])))
}

// compounds are product names that their owners write in camel case; split,
// they would turn into misleading common words ("git" + "hub").
var compounds = toSet(`github gitlab youtube paypal openai javascript typescript postgresql mongodb bigquery
linkedin whatsapp graphql devops pagerduty newrelic clickup openstreetmap huggingface sendgrid todoist youtrack
mysql dynamodb cloudflare cloudwatch elasticsearch opensearch sharepoint onedrive dropbox hubspot salesforce
everart firecrawl duckduckgo searxng`)

func isNumber(s string) bool {
	for _, r := range s {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// expand maps abbreviations that tool authors use interchangeably with the
// full word, so the taxonomy need not list both.
func expand(w string) []string {
	if x, ok := abbreviations[w]; ok {
		return x
	}
	return []string{w}
}

var abbreviations = map[string][]string{
	"repo":  {"repository"},
	"repos": {"repository"},
	"dir":   {"directory"},
	"dirs":  {"directory"},
	"db":    {"database"},
	"msg":   {"message"},
	"msgs":  {"message"},
	"k8s":   {"kubernetes"},
	"env":   {"environment"},
	"img":   {"image"},
	"doc":   {"document"},
	"docs":  {"document"},
	"pr":    {"pull", "request"},
	"prs":   {"pull", "request"},
	"fs":    {"file", "system"},
	"calc":  {"calculate"},
	"pg":    {"postgres"},
}

// stopWords carry no evidence for any skill: English function words and the
// CRUD verbs every tool uses ("get", "list", "create", "delete").
var stopWords = toSet(`a an the and or but nor of to in on at by for from with without into onto over under
about as is are was were be been being do does did done has have had having it its it's this that these those
there their them they you your we our us he she his her i me my not no yes can could should would will shall may
might must if then else than so such very just only also too more most less least all any each every some
both either neither one two three n per via using use used uses which who whom whose what when where why how
get gets set sets list lists create creates delete deletes remove removes update updates add adds new
multiple specific given return returns returned tool tools mcp server servers client clients item items
provide provides provided allow allows allowed within across between whether based including include
includes etc e g ie eg like other another same own make makes made way able need needs want
value values object objects result results info information detail detailed id ids name names type types
true false null optional default api apis endpoint up down out off through step steps call calls ask asks
take takes look looks similar long short full first last next previous current available existing
complete completes describe describes direct directly app apps`)

// weakStems are the stems of verbs and nouns shared by many skills ("search"
// files, the web or a graph; "read" files, mail or pages): they count, but far
// less than the nouns that say what a tool works on.
var weakStems = stemSet(`read write edit open search find fetch run execute send show view check generate
analyze save load retrieve manage handle work support start stop trigger toggle simulate demonstrate
perform operation process content contents text data request`)

func stemSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[textnorm.Stem(w)] = true
	}
	return m
}

func toSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// rejectStems name what tools do that no skill of a taxonomy covers: local
// processes and shells, the MCP protocol's own features shown off by demo
// servers, feedback to a vendor and the server's own accounts. A tool that
// says them is pushed towards no primary skill (they count in U), unless the
// taxonomy has a skill that uses the word.
var rejectStems = stemSet(`process processes terminal shell pid repl kill terminate spawn stdin stdout
resource resources roots elicitation annotation annotations subscription subscriber progress demonstrate demonstrates simulate simulated
toggle feedback rating account accounts login logout onboarding`)
