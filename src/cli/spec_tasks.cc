#include "cli/spec_tasks.h"

#include <algorithm>

namespace kvserve {

namespace {

constexpr const char* kStories[] = {
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with "
    "her red ball. One day, the ball rolled under a big tree and Lily could not reach it.",
    "Tom had a small dog called Max. Every morning Tom and Max walked to the river, where they "
    "watched the ducks swim. Max liked to bark at the ducks, but they never flew away.",
    "The old baker opened his shop early. He made bread, cakes and sweet buns for the town, and "
    "the children came every day to smell the warm bread through the window.",
    "Sara found a shiny stone on the beach. She showed it to her mom, who said it was a piece of "
    "glass worn smooth by the sea. Sara kept it in a box with her other treasures.",
};

constexpr const char* kOpenings[] = {"Once upon a time", "One day, a big dog", "The little bird",
                                     "Tom and Sam went"};

constexpr const char* kNotices[] = {
    "Notice to customers of Northwind Garden Supplies. From 3 March 2027 the Harbor Street store "
    "moves to 14 Mill Lane. The spring sale runs from 10 March to 24 March 2027: the Oak Bench is "
    "149.00 euros instead of 189.00 euros, and the Copper Watering Can is 24.50 euros. Questions "
    "go to Maria Lindqvist, store manager, or to Jonas Berg at the service desk.",
    "Update from Bluefin Cycles. The City Commuter bike costs 899 dollars from 1 April 2027, up "
    "from 849 dollars. The Trail Runner model is discontinued on 15 April 2027. Repairs booked "
    "before 31 March 2027 keep the old price of 45 dollars per hour. Contact Priya Nair for "
    "orders and Daniel Okafor for repairs.",
};

constexpr const char* kCode[] = {
    "import json\n\n\ndef load_items(path):\n    with open(path) as f:\n        return "
    "json.load(f)\n\n\ndef total_price(items):\n    total = 0\n    for item in items:\n        "
    "total += item[\"price\"] * item[\"quantity\"]\n    return total\n\n\ndef main():\n    items "
    "= load_items(\"cart.json\")\n    print(\"Total:\", total_price(items))\n\n\nif __name__ == "
    "\"__main__\":\n    main()\n",
    "def read_lines(path):\n    with open(path) as f:\n        return [line.strip() for line in "
    "f]\n\n\ndef count_words(lines):\n    counts = {}\n    for line in lines:\n        for word "
    "in line.split():\n            counts[word] = counts.get(word, 0) + 1\n    return counts\n\n\n"
    "def main():\n    counts = count_words(read_lines(\"notes.txt\"))\n    for word, n in "
    "sorted(counts.items()):\n        print(word, n)\n\n\nmain()\n",
};
constexpr const char* kStoryTopics[] = {"a lighthouse keeper who finds a lost kite",
                                        "two friends who build a boat from old doors"};

constexpr const char* kRenames[][2] = {{"total_price", "cart_total"},
                                       {"count_words", "word_counts"}};

}  // namespace

std::vector<ChatMessage> SpecTaskChat(const std::string& task, int i) {
  if (task == "extract") {
    return {{"system", "You are a careful assistant. Quote the text exactly."},
            {"user", std::string(kNotices[i % 2]) +
                         "\n\nList every date, price and person's name in this notice, one per "
                         "line, each with the sentence it comes from, quoted word for word."}};
  }
  if (task == "code") {
    const auto& rename = kRenames[i % 2];
    return {{"system", "You are a programming assistant. Answer with code only."},
            {"user", std::string("Here is a Python file:\n\n") + kCode[i % 2] +
                         "\nRename the function " + rename[0] + " to " + rename[1] +
                         " everywhere and return the whole file."}};
  }
  if (task == "story") {
    return {{"system", "You are a helpful assistant."},
            {"user", std::string("Write a short new story about ") + kStoryTopics[i % 2] + "."}};
  }
  // multiturn
  return {
      {"system", "You are a helpful assistant."},
      {"user", "Give me a packing list for a weekend of hiking, five items."},
      {"assistant",
       "1. Rain jacket\n2. Hiking boots\n3. Water bottle\n4. Map and compass\n5. First aid kit"},
      {"user", i % 2 == 0 ? "Repeat the same list exactly and add a sixth item: sunscreen."
                          : "Repeat the same list exactly and add a sixth item: a torch."}};
}

bool IsChatSpecTask(const std::string& task) {
  return task == "extract" || task == "code" || task == "multiturn" || task == "story";
}

std::string SpecTaskNames() { return "grounded, extract, code, multiturn, free, story"; }

std::vector<std::string> AllSpecTasks() {
  return {"grounded", "extract", "code", "multiturn", "free", "story"};
}

Result<std::vector<std::string>> ParseSpecTasks(const std::string& value) {
  if (value == "both") return std::vector<std::string>{"grounded", "free"};
  if (value == "all") return AllSpecTasks();
  const std::vector<std::string> known = AllSpecTasks();
  std::vector<std::string> tasks;
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string name = value.substr(start, comma - start);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return Status::InvalidArgument("'" + name + "' is not one of " + SpecTaskNames() +
                                     ", both, all");
    }
    tasks.push_back(name);
    start = comma + 1;
  }
  return tasks;
}

Result<std::vector<int32_t>> SpecTaskPrompt(const std::string& task, int i,
                                            const Tokenizer& tokenizer, const ChatTemplate& chat) {
  if (task == "grounded") {
    const std::string story = kStories[i % 4];
    const std::string text = "Here is a story:\n" + story +
                             "\nNow the same story again, word for word:\n" + story.substr(0, 20);
    return tokenizer.Encode(text, /*add_special=*/true, /*parse_special=*/false);
  }
  if (task == "free") return tokenizer.Encode(kOpenings[i % 4], true, false);
  if (IsChatSpecTask(task)) {
    const std::vector<ChatMessage> messages = SpecTaskChat(task, i);
    return chat.EncodeConversation(tokenizer, messages, /*add_generation_prompt=*/true);
  }
  return Status::InvalidArgument("task '" + task + "' is not one of " + SpecTaskNames());
}

}  // namespace kvserve
