// apps/lda's corpus and vocabulary readers: errors named by file and line, batches, kept
// documents.
#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lda/corpus.h"

namespace lda {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// A file read in batches gives the documents of a whole read, each batch numbered from its
// first document; a kept subset reads the others as empty; CountDocs counts a last line
// without its newline.
TEST(LdaCorpusTest, BatchesAndKeptDocumentsMatchAWholeRead) {
  const std::string path = Write("lda_batches.txt", "0 1 2\n\n2 2\n1\n0 0 0 1\n2\n1 2");
  const Corpus whole = ReadCorpus(path, 3);
  ASSERT_EQ(whole.docs(), 7u);
  EXPECT_EQ(CountDocs(path), 7u);
  std::vector<uint64_t> firsts;
  Corpus joined;
  ForEachBatch(path, 3, 3, [&](uint64_t first, const Corpus& b) {
    EXPECT_EQ(first, joined.docs());
    firsts.push_back(first);
    for (size_t d = 0; d < b.docs(); ++d) joined.Add(&b.words[b.offsets[d]], b.length(d));
  });
  EXPECT_EQ(firsts, (std::vector<uint64_t>{0, 3, 6}));
  EXPECT_EQ(joined.offsets, whole.offsets);
  EXPECT_EQ(joined.words, whole.words);
  uint64_t tokens = 0;
  const Corpus kept = ReadCorpus(
      path, 3, [](uint64_t d) { return d % 2 == 0; }, &tokens);
  EXPECT_EQ(tokens, whole.tokens());
  ASSERT_EQ(kept.docs(), 7u);
  for (size_t d = 0; d < 7; ++d) EXPECT_EQ(kept.length(d), d % 2 == 0 ? whole.length(d) : 0u);
  try {
    ForEachBatch(Write("lda_batches_bad.txt", "0\n1\n2\n0 9\n"), 3, 2,
                 [](uint64_t, const Corpus&) {});
    FAIL() << "9 is not below the vocabulary size";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lda_batches_bad.txt:4"), std::string::npos) << e.what();
  }
}

TEST(LdaCorpusTest, ErrorsNameTheFileAndLine) {
  const std::string ok = Write("lda_ok.txt", "0 1 2\n\n2 2\n");
  Corpus c = ReadCorpus(ok, 3);
  ASSERT_EQ(c.docs(), 3u);
  EXPECT_EQ(c.length(1), 0u);
  EXPECT_EQ(c.tokens(), 5u);
  const std::string bad = Write("lda_bad.txt", "0 1\n1 x2 0\n");
  try {
    ReadCorpus(bad, 3);
    FAIL() << "x2 is not a word id";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lda_bad.txt:2"), std::string::npos) << e.what();
  }
  try {
    ReadCorpus(ok, 2);
    FAIL() << "2 is not below the vocabulary size";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lda_ok.txt:1"), std::string::npos) << e.what();
  }
  const std::string vocab = Write("lda_vocab.txt", "the\t10\nend\t3\n");
  Vocab v = ReadVocab(vocab);
  EXPECT_EQ(v.size(), 2u);
  EXPECT_EQ(v.freq[1], 3u);
  const std::string badv = Write("lda_badv.txt", "the\t10\nend\tmany\n");
  try {
    ReadVocab(badv);
    FAIL() << "many is not a count";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("lda_badv.txt:2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lda
