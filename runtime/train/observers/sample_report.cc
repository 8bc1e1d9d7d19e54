// --sample: text drawn every --sample-every steps while training and once
// after the last (collective under sharding), printed and logged. A
// token vocabulary's sample with no --prompt starts from end of text, as
// llm.c's do.

#include <cstdio>

#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "runtime/status_macros.h"
#include "runtime/train/observers/observer.h"
#include "runtime/train/sampler.h"
#include "runtime/train/vocabulary.h"

namespace stepc {
namespace {

class SampleReport : public Observer {
 public:
  // Checked before the first step: the module samples, the vocabulary
  // (the data's, else the checkpoint's) encodes the prompt.
  absl::Status Open(const JobState& job) {
    STEPC_RETURN_IF_ERROR(CheckCanSample(*job.module));
    STEPC_ASSIGN_OR_RETURN(vocabulary_,
                           SampleVocabulary(job.data->vocabulary(), job.resume.trainer));
    from_end_of_text_ = !job.o.Given("prompt") && vocabulary_.end_of_text() >= 0;
    if (from_end_of_text_) {
      prompt_ids_ = {vocabulary_.end_of_text()};
      return absl::OkStatus();
    }
    STEPC_ASSIGN_OR_RETURN(prompt_ids_, vocabulary_.Encode(job.o.prompt));
    return absl::OkStatus();
  }

  absl::Status AfterStep(JobState& job, const StepEvent& e) override {
    if (job.o.sample_every <= 0 || e.step % job.o.sample_every != 0 || e.step == job.steps)
      return absl::OkStatus();
    return job.Traced("sample", e.step, [&] { return Report(job, e.step, /*final=*/false); });
  }
  absl::Status Finish(JobState& job) override { return Report(job, job.steps, /*final=*/true); }

 private:
  // A sample after `step`: printed, and a metrics line. The last one draws
  // with --seed itself, the ones while training with the step added, so
  // they differ at a temperature.
  absl::Status Report(JobState& job, int64_t step, bool final) {
    const TrainOptions& o = job.o;
    SampleOptions options;
    options.tokens = o.sample;
    options.temperature = o.temperature;
    options.top_k = o.top_k;
    options.seed = final ? job.schedule.seed : job.schedule.seed + static_cast<uint64_t>(step);
    // Never an id past the vocabulary (a model's may be padded larger).
    options.vocabulary = vocabulary_.size();
    const double start = MonotonicSeconds();
    // A long sample says how far it is, every 10 s (stderr: stdout keeps
    // the text alone).
    double said = 0;
    if (job.lead)
      options.progress = [&](int64_t drawn) {
        const double seconds = MonotonicSeconds() - start;
        if (seconds - said < 10.0 || drawn == options.tokens) return;
        said = seconds;
        std::fprintf(stderr, "stepc-run: sampling: %lld of %lld tokens, %.1f tokens/s\n",
                     static_cast<long long>(drawn), static_cast<long long>(options.tokens),
                     drawn / seconds);
      };
    STEPC_ASSIGN_OR_RETURN(const std::vector<int32_t> drawn,
                           Generate(*job.session, prompt_ids_, options));
    const double seconds = MonotonicSeconds() - start;
    const std::string text =
        (from_end_of_text_ ? std::string() : o.prompt) + vocabulary_.Decode(drawn);
    // (Tokens may split a UTF-8 character: the JSON string replaces a
    // broken one rather than failing.)
    STEPC_RETURN_IF_ERROR(job.metrics->Write(absl::StrFormat(
        "{\"step\": %d, \"sample\": %s}\n", step,
        nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))));
    if (!job.lead) return absl::OkStatus();
    const char* unit = vocabulary_.by_character() ? "characters" : "tokens";
    if (final)
      std::printf("stepc-run: sample of %lld %s (temperature %g, top-k %lld, %.1f tokens/s):\n%s\n",
                  static_cast<long long>(drawn.size()), unit, options.temperature,
                  static_cast<long long>(options.top_k), drawn.size() / seconds, text.c_str());
    else
      std::printf("sample %5lld/%lld | %lld %s, %.2f s:\n%s\n", static_cast<long long>(step),
                  static_cast<long long>(job.steps), static_cast<long long>(drawn.size()), unit,
                  seconds, text.c_str());
    std::fflush(stdout);
    return absl::OkStatus();
  }

  Vocabulary vocabulary_;
  std::vector<int32_t> prompt_ids_;
  bool from_end_of_text_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Observer>> MakeSampleReport(const JobState& job) {
  auto report = std::make_unique<SampleReport>();
  STEPC_RETURN_IF_ERROR(report->Open(job));
  return report;
}

}  // namespace stepc
