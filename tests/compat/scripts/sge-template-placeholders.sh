#!/bin/bash

#$ -pe smp #{CORES}           # slots in the "smp" parallel environment
#$ -cwd                       # run where qsub ran
##$ -V                         # pass the environment
#$ -S /bin/bash               # the shell
#$ -m as                      # mail on abort and suspend
#$ -M #{EMAIL}                # mail address
#$ -l h_rt=#{TIME}            # time limit
#$ -l h_vmem=#{MEMORY}        # memory per slot

## The command

# gridsched corpus: replaced #{COMMAND}
echo command
