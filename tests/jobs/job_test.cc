// The job state machine (jobs/job.h): every pair of states, and the names the API uses.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "jobs/job.h"

namespace tollgate::jobs {
namespace {

constexpr JobStatus kAll[] = {JobStatus::pending, JobStatus::running, JobStatus::completed, JobStatus::failed,
                              JobStatus::cancelled};

TEST(JobStateMachine, OnlyTheMovesOfTheDesignAreAllowedAndAnEndedJobNeverChanges) {
  const std::set<std::pair<JobStatus, JobStatus>> allowed{
      {JobStatus::pending, JobStatus::running},   {JobStatus::pending, JobStatus::cancelled},
      {JobStatus::pending, JobStatus::failed},    {JobStatus::running, JobStatus::completed},
      {JobStatus::running, JobStatus::failed},    {JobStatus::running, JobStatus::cancelled},
  };
  for (JobStatus from : kAll) {
    for (JobStatus to : kAll) {
      if (from == to) continue;
      const Status s = check_transition(from, to);
      EXPECT_EQ(s.ok(), allowed.count({from, to}) == 1) << job_status_name(from) << " -> " << job_status_name(to);
      EXPECT_EQ(s.code(), s.ok() ? Code::ok : Code::conflict);
    }
  }
}

TEST(JobStateMachine, ACancelEndsOnlyAJobThatHasNotEnded) {
  EXPECT_TRUE(cancel_ends(JobStatus::pending));
  EXPECT_TRUE(cancel_ends(JobStatus::running));
  EXPECT_FALSE(cancel_ends(JobStatus::completed));
  EXPECT_FALSE(cancel_ends(JobStatus::failed));
  EXPECT_FALSE(cancel_ends(JobStatus::cancelled));
}

TEST(JobStateMachine, StatusNamesAreTheApisAndReadBack) {
  for (JobStatus s : kAll) EXPECT_EQ(parse_job_status(job_status_name(s)), s);
  EXPECT_EQ(job_status_name(JobStatus::cancelled), "cancelled");
  EXPECT_EQ(parse_job_status("done"), std::nullopt);
  EXPECT_EQ(parse_job_status("Pending"), std::nullopt);
}

}  // namespace
}  // namespace tollgate::jobs
