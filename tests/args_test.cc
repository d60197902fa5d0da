// The flag parser, the commands' flag tables and the "did you mean" suggestion, without a model.
#include "cli/args.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/model_options.h"
#include "cli/sampling_flags.h"
#include "cli/suggestion.h"

namespace kvserve {
namespace {

std::string CollapseSpaces(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n';
    if (!space || (!out.empty() && out.back() != ' ')) out.push_back(space ? ' ' : c);
  }
  return out;
}

// The parse error for argv against `kvserve run`'s table, "" when it parses.
std::string RunParseError(const std::vector<std::string>& argv) {
  return Args::Parse(argv, RunFlagTable()).status().message();
}

TEST(ArgsParse, ReadsNamesAliasesInlineValuesSwitchesAndPositionals) {
  auto args = Args::Parse({"-m", "model.gguf", "--temp=0.5", "--no-cache", "word", "-5", "-n", "7"},
                          RunFlagTable());
  ASSERT_TRUE(args.ok()) << args.message();
  EXPECT_EQ(args->GetOr("--model", ""), "model.gguf");
  EXPECT_EQ(args->GetOr("--temp", ""), "0.5");
  EXPECT_EQ(*args->GetInt("--n-predict", 0), 7);
  EXPECT_TRUE(args->Has("--no-cache"));
  EXPECT_FALSE(args->Has("--ignore-eos"));
  EXPECT_EQ(args->positional(), (std::vector<std::string>{"word", "-5"}));
  EXPECT_FALSE(args->help_requested());
}

TEST(ArgsParse, UnknownFlagSuggestsTheNearestOne) {
  EXPECT_EQ(RunParseError({"--tmp", "0"}), "unknown flag '--tmp' (did you mean '--temp'?)");
  EXPECT_EQ(RunParseError({"--n-predcit=4"}),
            "unknown flag '--n-predcit=4' (did you mean '--n-predict'?)");
  EXPECT_EQ(RunParseError({"--frobnicate"}), "unknown flag '--frobnicate'");
}

TEST(ArgsParse, ValueErrorsNameTheFlag) {
  EXPECT_EQ(RunParseError({"-m", "x", "-n"}), "flag --n-predict needs a value (N)");
  EXPECT_EQ(RunParseError({"--no-cache=1"}), "flag --no-cache takes no value (got '--no-cache=1')");
}

TEST(ArgsParse, HelpStopsParsingUnlessItIsAValue) {
  for (const std::vector<std::string>& argv :
       {std::vector<std::string>{"--help"}, {"-h"}, {"-m", "x", "--help", "--bogus"}}) {
    auto args = Args::Parse(argv, RunFlagTable());
    ASSERT_TRUE(args.ok()) << args.message();
    EXPECT_TRUE(args->help_requested());
  }
  auto prompt = Args::Parse({"-p", "--help"}, RunFlagTable());
  ASSERT_TRUE(prompt.ok());
  EXPECT_FALSE(prompt->help_requested());
  EXPECT_EQ(prompt->GetOr("--prompt", ""), "--help");
  // An error before the help is still an error.
  EXPECT_NE(RunParseError({"--tmp", "--help"}), "");
}

TEST(FlagTables, EveryFlagParsesByNameAndAliasAndNoNameIsTakenTwice) {
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.name);
    const FlagTable table = command.flags();
    std::set<std::string> seen = {"--help", "-h"};
    for (const FlagGroup& group : table.groups) {
      for (const Flag& flag : group.flags) {
        EXPECT_TRUE(seen.insert(flag.name).second) << flag.name << " is in the table twice";
        EXPECT_EQ(flag.name.rfind("--", 0), 0u) << flag.name;
        EXPECT_FALSE(flag.help.empty()) << flag.name;
        std::vector<std::string> spellings = {flag.name};
        if (!flag.alias.empty()) {
          EXPECT_TRUE(seen.insert(flag.alias).second) << flag.alias << " is in the table twice";
          spellings.push_back(flag.alias);
        }
        for (const std::string& spelling : spellings) {
          std::vector<std::string> argv = {spelling};
          if (flag.takes_value()) argv.push_back("v");
          auto args = Args::Parse(argv, table);
          ASSERT_TRUE(args.ok()) << spelling << ": " << args.message();
          EXPECT_TRUE(args->Has(flag.name)) << spelling;
          if (flag.takes_value()) {
            EXPECT_EQ(args->GetOr(flag.name, ""), "v") << spelling;
          }
        }
      }
    }
  }
}

TEST(FlagTables, HelpShowsEveryFlagWithItsValueDefaultAndDescription) {
  for (const Command& command : Commands()) {
    SCOPED_TRACE(command.name);
    const FlagTable table = command.flags();
    const std::string help = CollapseSpaces(table.Help(command.summary));
    EXPECT_EQ(help.rfind("usage: kvserve " + std::string(command.name), 0), 0u) << help;
    EXPECT_NE(help.find(command.summary), std::string::npos) << help;
    EXPECT_NE(help.find("-h, --help print this help and exit"), std::string::npos) << help;
    for (const FlagGroup& group : table.groups) {
      EXPECT_NE(help.find(group.title + ":"), std::string::npos) << group.title;
      for (const Flag& flag : group.flags) {
        std::string synopsis = flag.alias.empty() ? "" : flag.alias + ", ";
        synopsis += flag.name + (flag.takes_value() ? " " + flag.value_name : "");
        std::string description = flag.help;
        if (!flag.default_text.empty()) description += " (default: " + flag.default_text + ")";
        EXPECT_NE(help.find(" " + synopsis + " " + description), std::string::npos)
            << synopsis << " " << description << " missing from:\n"
            << help;
      }
    }
  }
}

TEST(FlagTables, HelpLinesFitOneHundredColumns) {
  for (const Command& command : Commands()) {
    const std::string help = command.flags().Help(command.summary);
    size_t start = 0;
    while (start < help.size()) {
      const size_t end = std::min(help.find('\n', start), help.size());
      EXPECT_LE(end - start, 100u) << command.name << ": " << help.substr(start, end - start);
      start = end + 1;
    }
  }
}

// The number a default text starts with ("0.8", "0, off", "16").
double ShownDefault(const FlagGroup& group, const std::string& name) {
  for (const Flag& flag : group.flags) {
    if (flag.name != name) continue;
    char* end = nullptr;
    const double value = std::strtod(flag.default_text.c_str(), &end);
    EXPECT_NE(end, flag.default_text.c_str()) << name << ": '" << flag.default_text << "'";
    return value;
  }
  ADD_FAILURE() << name << " is not in group " << group.title;
  return -1;
}

TEST(FlagTables, SharedGroupsShowTheDefaultsTheReadersUse) {
  const FlagGroup sampling_flags = SamplingFlags();
  auto sampling =
      ReadSamplingParams(*Args::Parse({}, FlagTable{.usage = "", .groups = {sampling_flags}}));
  ASSERT_TRUE(sampling.ok());
  EXPECT_EQ(sampling->temperature, static_cast<float>(ShownDefault(sampling_flags, "--temp")));
  EXPECT_EQ(sampling->seed, static_cast<uint64_t>(ShownDefault(sampling_flags, "--seed")));
  EXPECT_EQ(sampling->top_k, static_cast<int>(ShownDefault(sampling_flags, "--top-k")));
  EXPECT_EQ(sampling->top_p, static_cast<float>(ShownDefault(sampling_flags, "--top-p")));
  EXPECT_EQ(sampling->min_p, static_cast<float>(ShownDefault(sampling_flags, "--min-p")));
  EXPECT_EQ(sampling->repetition_penalty,
            static_cast<float>(ShownDefault(sampling_flags, "--repeat-penalty")));

  const FlagGroup model_flags = ModelFlags(), engine_flags = EngineFlags();
  const FlagTable table{.usage = "", .groups = {model_flags, engine_flags}};
  auto model = ReadModelOptions(*Args::Parse({"-m", "x.gguf"}, table));
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->n_threads, ShownDefault(model_flags, "--threads"));
  EXPECT_EQ(model->n_ctx, ShownDefault(model_flags, "--ctx-size"));
  EXPECT_EQ(model->kv_type, *ParseKvType(table.Find("--kv-type")->default_text));
  auto engine = ReadEngineOptions(*Args::Parse({}, table), *model);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(engine->block_size, ShownDefault(engine_flags, "--block-size"));
  EXPECT_EQ(engine->max_num_seqs, ShownDefault(engine_flags, "--max-num-seqs"));
  EXPECT_EQ(engine->max_batched_tokens, ShownDefault(engine_flags, "--max-batched-tokens"));
  EXPECT_EQ(engine->kv_memory_bytes, 0u);  // "room for --max-num-seqs full contexts"
  EXPECT_TRUE(engine->prefix_caching);
}

TEST(Commands, NamesAreDistinctAndFound) {
  std::set<std::string> names;
  for (const Command& command : Commands()) {
    EXPECT_TRUE(names.insert(command.name).second) << command.name;
    EXPECT_EQ(FindCommand(command.name), &command);
  }
  EXPECT_EQ(FindCommand("nope"), nullptr);
  EXPECT_NE(FindCommand("version"), nullptr);
}

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("temp", "temp"), 0u);
  EXPECT_EQ(EditDistance("tmp", "temp"), 1u);
  EXPECT_EQ(EditDistance("tmep", "temp"), 1u);  // one swap, not two substitutions
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("temperature", "temp"), 7u);
}

TEST(NearestName, SuggestsTyposOnly) {
  const std::vector<std::string> flags = {"--temp", "--top-k", "--top-p", "--n-predict",
                                          "-n",     "--model", "-m"};
  EXPECT_EQ(NearestName("--tmp", flags), "--temp");
  EXPECT_EQ(NearestName("--tmep", flags), "--temp");
  EXPECT_EQ(NearestName("-temp", flags), "--temp");  // dashes do not count
  EXPECT_EQ(NearestName("--n-predcit", flags), "--n-predict");
  EXPECT_EQ(NearestName("--top-x", flags), "--top-k");  // a tie goes to the first
  EXPECT_EQ(NearestName("--modle", flags), "--model");
  EXPECT_EQ(NearestName("--temperature", flags), std::nullopt);
  EXPECT_EQ(NearestName("--frobnicate", flags), std::nullopt);
  EXPECT_EQ(NearestName("-x", flags), std::nullopt);  // one letter: every name is as near
  EXPECT_EQ(NearestName("--", flags), std::nullopt);
  EXPECT_EQ(DidYouMean("--tmp", flags), " (did you mean '--temp'?)");
  EXPECT_EQ(DidYouMean("--frobnicate", flags), "");

  std::vector<std::string> commands;
  for (const Command& command : Commands()) commands.push_back(command.name);
  EXPECT_EQ(NearestName("rn", commands), "run");
  EXPECT_EQ(NearestName("sevre", commands), "serve");
  EXPECT_EQ(NearestName("tokenise", commands), "tokenize");
  EXPECT_EQ(NearestName("verison", commands), "version");
  EXPECT_EQ(NearestName("xyz", commands), std::nullopt);
}

}  // namespace
}  // namespace kvserve
